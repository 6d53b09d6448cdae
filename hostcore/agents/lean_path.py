"""An event handled with no host: every due plugin's lean handler, called in turn.

When the dispatcher finds that each plugin due for an event declared a lean handler
for it (:func:`~hostcore.agents.dispatch.lean_handlers`), ``hostcore hook`` calls
those handlers here and never builds the host: a SessionStart that only file custody
wants costs the agent custody's own imports, not pluggy's, the host's and every
domain's. Each handler gets a :class:`~hostcore.plugin.lean.LeanEvent` with the
plugin's config table and what is left of the hook's budget.

A handler that raises (or a config file this module cannot read as the host would)
is not a fault of this path: the plugin is handed back to the full path, which calls
its ``hostcore_agent_event`` with a host and notes the ``lean_failed`` fault, so
nothing a lean handler could not do is lost, and a broken config is reported by the
code that reports it everywhere else.

Imports only the standard library, and :mod:`tomllib` only when there is a config
file to read.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

from hostcore.agents import dispatch
from hostcore.agents.budget import BUDGET_FLOOR_SECONDS, budget_seconds
from hostcore.config_tables import CONFIG_FILE_NAME, find_table, two_spellings
from hostcore.msgspec_import import import_msgspec
from hostcore.plugin.lean import LeanEvent

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping



def plugin_tables(root: str, config: str | None) -> dict[str, object] | None:
    """The config's ``plugins`` tables as the host would find them (``--config``, else
    ``<root>/hostcore.toml``, else none); ``None`` for anything the host would refuse
    or report (a named file missing, a file that does not parse, a table that is no
    table, two spellings of one), which the full path then does."""
    path = config if config is not None else os.path.join(root, CONFIG_FILE_NAME)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return {} if config is None else None
    except OSError:
        return None
    # Imported only when there is a file: most roots have none.
    import tomllib

    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # tomllib.TOMLDecodeError is a ValueError
    tables = raw.get("plugins", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()) \
            or two_spellings(tables) is not None:
        return None
    return tables


def run(decision: dispatch.Decision, handlers: Mapping[str, str], *, agent: str,
        config: str | None, env: Mapping[str, str], started: float,
        clock: Callable[[], float] = time.monotonic) -> list[str] | None:
    """Call ``handlers`` (plugin name to ``module:function``) for the event
    ``decision`` holds; the plugins whose handler raised, for the full path, or
    ``None`` when the config is one to leave to the full path (nothing was called).
    ``started`` is the hook process's start on ``clock``."""
    tables = plugin_tables(decision.root, config)
    if tables is None:
        return None
    import_msgspec()
    fields = decision.fields
    name = str(fields["hook_event_name"])
    session_id = str(fields["session_id"])
    budget = budget_seconds(name, agent, env)
    called: list[str] = []
    failed: list[str] = []
    for plugin, target in handlers.items():
        found = find_table(tables, plugin)
        event = LeanEvent(
            agent=agent, name=name, session_id=session_id, cwd=_text(fields, "cwd") or "",
            root=decision.root, config=found[1] if found and isinstance(found[1], dict) else {},
            budget_seconds=max(BUDGET_FLOOR_SECONDS.get(name, 0.0),
                               budget - (clock() - started)),
            transcript_path=_text(fields, "transcript_path") or None,
            tool_name=_text(fields, "tool_name"), tool_use_id=_text(fields, "tool_use_id"),
            source=_text(fields, "source"), reason=_text(fields, "reason"),
            stop_hook_active=fields.get("stop_hook_active") is True)
        try:
            _call(target, event)
        except (Exception, SystemExit) as exc:  # a handler's exit may not end the hook
            # The plugin's name and the exception's type only: a message can hold a
            # path or the session id. The full path logs the rest if it fails too.
            sys.stderr.write(f"hostcore hook: {plugin}'s lean handler raised "
                             f"{type(exc).__name__}; its hook runs with a host\n")
            failed.append(plugin)
        else:
            called.append(plugin)
    throttled = dispatch.throttled(decision.found)
    dispatch.housekeep(decision.root, name, session_id, [p for p in called if p in throttled])
    return failed


def _call(target: str, event: LeanEvent) -> None:
    module_name, _, function_name = target.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    # stdout is the agent's: nothing but hook JSON goes there (as plugin_output does).
    stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        function(event)
    finally:
        sys.stdout = stdout


def _text(fields: Mapping[str, object], name: str) -> str | None:
    value = fields.get(name)
    return value if isinstance(value, str) else None
