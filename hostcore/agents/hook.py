"""What one ``hostcore hook`` run does with the event on its stdin.

The run reads stdin (at most :data:`~hostcore.agents.events.MAX_INPUT_BYTES` kept;
the rest is read and dropped, so the agent's write never fails), decodes it into
an :class:`~hostcore.agents.events.AgentEvent`, loads a lean plugin set (the
built-ins :data:`LEAN_BUILTINS` and only the plugins the index names, see
:mod:`hostcore.agents.index`), builds a host on it and calls every plugin's
``hostcore_agent_event`` on its own (:mod:`hostcore.plugin.calls`). Whatever goes
wrong is a fault: noted under the root by kind (:mod:`hostcore.agents.faults`),
logged on stderr, and the run still exits 0: an agent is never held up or told
its hook failed for a fault of hostcore's. Then every plugin's
``hostcore_agent_gate`` is called the same way: at a Stop whose
``stop_hook_active`` is false, a :class:`~hostcore.plugin.gate.GateVerdict` asking
the agent to keep working makes the run exit 2 with its message on stderr (the
one non-zero exit); a gate that raises is a fault like any other, and never
blocks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, TextIO

import msgspec

from hostcore.agents import dispatch, index
from hostcore.agents.budget import BUDGET_FLOOR_SECONDS, budget_seconds
from hostcore.agents.dispatch import read_input
from hostcore.agents.events import AGENTS, MAX_INPUT_BYTES, EventRefused, decode_event
from hostcore.errors import ConfigError
from hostcore.plugin.calls import callers, guarded, plugin_output
from hostcore.plugin.discovery import entry_points
from hostcore.plugin.gate import GateVerdict
from hostcore.plugin.loader import ENV_ALLOW, PluginSet, load_plugins
from hostcore.plugin.markers import ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host

log = logging.getLogger("hostcore.agents.hook")

# The built-ins a hook loads: the core's events (every host emits one), this
# domain's own plugin, and the staleness gate with the governing inputs it stamps
# and checks by, and the work items' events (the gate's decisions are the ledger's,
# whose index emits them). Evidence and export are never loaded by a hook; the
# ledger is read only when the gate resolves governance (a file-writing tool, a Stop).
LEAN_BUILTINS = ("hostcore.plugin.core", "hostcore.agents.plugin",
                 "hostcore.workitems.plugin", "hostcore.governance.plugin",
                 "hostcore.governance.hook")
# The exit that asks the agent to keep working (Claude Code and Codex hand the
# hook's stderr to the model); only a gate's verdict at a Stop makes it.
KEEP_WORKING_EXIT = 2


class HookOutcome(NamedTuple):
    """What one hook run came to: the kinds of the faults it noted, and the gates'
    message when they ask the agent to keep working (``None`` when they do not)."""

    faults: list[str]
    keep_working: str | None = None

    def answer(self, stderr: TextIO) -> int:
        """Say the gates' message on ``stderr`` (where the agent reads it) and return
        the exit status the hook run ends with."""
        if not self.keep_working:
            return 0
        stderr.write(self.keep_working + "\n")
        stderr.flush()
        return KEEP_WORKING_EXIT


def plugin_index(root: Path, env: Mapping[str, str]
                 ) -> tuple[dict[str, object], PluginSet | None]:
    """The plugin index under ``root``, as :mod:`~hostcore.agents.dispatch` reads it,
    rebuilt first when the installed plugins changed; then also every plugin, loaded
    to rebuild it (the run uses them rather than load its plugins a second time)."""
    expected = index.signature(env)
    found = dispatch.read_index(str(root), expected)
    if found is not None:
        return found, None
    built, every = _rebuild(root, env, expected)
    # As the dispatcher reads the file: JSON's types.
    decoded: dict[str, object] = msgspec.json.decode(msgspec.json.encode(built))
    return decoded, every


def lean_plugins(env: Mapping[str, str], names: Collection[str],
                 found: Mapping[str, object] | None = None) -> PluginSet:
    """The plugins a hook loads: :data:`LEAN_BUILTINS` and the entry-point plugins
    ``names`` (the index's, made under the user's allow and block lists: they are
    allowed, and the block list still applies), from the entry points the index
    ``found`` keeps when it keeps theirs (no metadata file is read), else as found on
    ``sys.path``."""
    return load_plugins(LEAN_BUILTINS, (), load_entrypoints=True,
                        env={**env, ENV_ALLOW: ",".join(names)},
                        found=None if found is None else index.entry_points_of(found, names))


def rebuild_index(root: Path, env: Mapping[str, str], expected: str | None = None
                  ) -> index.PluginIndex:
    """Load every plugin once and cache which implement the hooks, and for what."""
    return _rebuild(root, env, expected or index.signature(env))[0]


def _rebuild(root: Path, env: Mapping[str, str], expected: str
             ) -> tuple[index.PluginIndex, PluginSet]:
    found = entry_points(ENTRY_POINT_GROUP)
    every = load_plugins(LEAN_BUILTINS, (), load_entrypoints=True, env=env, found=found)
    built = index.build(every, expected, found)
    index.write(root, built)
    return built, every


def handle_stdin(stream: BinaryIO, *, agent: str | None, root_for: Callable[[], Path],
                 env: Mapping[str, str], make_host: Callable[[Path, PluginSet], Host],
                 started: float) -> HookOutcome:
    """Read the event on ``stream`` and handle it (:func:`run_hook`) under the root
    ``root_for()`` makes ready; a root that cannot be used is said on stderr, as
    nothing can be noted under it."""
    data, oversized = read_input(stream)
    return handle_input(data, oversized, agent=agent, root_for=root_for, env=env,
                        make_host=make_host, started=started)


def handle_input(data: bytes, oversized: bool, *, agent: str | None,
                 root_for: Callable[[], Path], env: Mapping[str, str],
                 make_host: Callable[[Path, PluginSet], Host],
                 started: float, lean_failed: Collection[str] = ()) -> HookOutcome:
    """Handle the event ``data`` (:func:`handle_stdin`): only the plugins the index
    says are due for it are loaded and called; none due, nothing is built.
    ``lean_failed``: the plugins whose lean handler raised for this event
    (:mod:`~hostcore.agents.lean_path`, which called every other due one): only they
    are called, and each is a ``lean_failed`` fault."""
    try:
        root = root_for()
    except (ConfigError, OSError) as exc:
        log.warning("hook: %s; the event was dropped", exc)
        return HookOutcome(["root"])
    fields = None if oversized or agent not in AGENTS else dispatch.payload_fields(data)
    due: list[str] | None = None
    throttled: set[str] = set()
    loaded = None
    found: dict[str, object] | None = None
    if fields is not None:  # else run_hook notes the fault, calling nobody
        found, loaded = plugin_index(root, env)
        due = dispatch.due_plugins(found, fields, str(root), time.time())
        if lean_failed:
            due = [plugin for plugin in due if plugin in lean_failed]
        if not due:
            return HookOutcome([])
        throttled = dispatch.throttled(found) & set(due)
    return run_hook(agent=agent, data=data, oversized=oversized, root=root, env=env,
                    make_host=lambda plugins: make_host(root, plugins), started=started,
                    due=due, throttled=throttled, plugins=loaded, found=found,
                    noted=["lean_failed"] * len(lean_failed))


def run_hook(*, agent: str | None, data: bytes, oversized: bool, root: Path,
             env: Mapping[str, str], make_host: Callable[[PluginSet], Host],
             started: float, clock: Callable[[], float] = time.monotonic,
             due: Collection[str] | None = None, throttled: Collection[str] = (),
             plugins: PluginSet | None = None, found: Mapping[str, object] | None = None,
             noted: Collection[str] = ()) -> HookOutcome:
    """Handle one event: the kinds of the faults it noted (none when all went well)
    and what the gates ask. Never raises for a fault: each is noted under ``root``
    and logged. ``due``: the plugins to call (``None``: every one implementing the
    hooks); of those, the ``throttled`` ones called without a fault get a stamp
    (:func:`~hostcore.agents.dispatch.stamp`). ``plugins``: a set already loaded
    holding them (else the lean set is loaded, from the entry points the plugin index
    ``found`` keeps). ``noted``: fault kinds met before this run, noted with its own."""
    kinds: list[str] = []
    keep_working: list[str] = []
    event_name = "-"

    def fault(kind: str, detail: str) -> None:
        kinds.append(kind)
        # Kinds and event names only: the detail of a plugin's failure is logged by
        # the loader, and input is never echoed (it can hold a prompt).
        log.warning("hook: %s (%s); the agent goes on", kind, detail)
        # Imported here: sqlite3 and the clock's modules cost a hook that meets no fault.
        from hostcore.agents import faults

        try:
            faults.note(root, kind, agent=agent or "-", event=event_name)
        except Exception as exc:  # a full disk, a locked file: the log line stays
            log.warning("hook: the fault could not be kept under the root: %s",
                        type(exc).__name__)

    if agent not in AGENTS:
        fault("unknown_agent", "--agent names no agent hostcore knows")
        return HookOutcome(kinds)
    if oversized:
        fault("oversized", f"stdin is larger than {MAX_INPUT_BYTES} bytes")
        return HookOutcome(kinds)
    try:
        event = decode_event(data, agent, budget_seconds=0.0)
    except EventRefused as exc:
        fault(exc.kind, str(exc).partition(": ")[2])
        return HookOutcome(kinds)
    event_name = event.name
    for kind in noted:
        fault(kind, "a plugin's lean handler raised; its hook runs with a host")
    try:
        with plugin_output():  # stdout is the agent's: nothing but hook JSON goes there
            if plugins is None:
                if found is None:
                    found = plugin_index(root, env)[0]
                names = found["plugins"] if due is None else due
                assert isinstance(names, Collection)
                plugins = lean_plugins(env, [n for n in names if isinstance(n, str)
                                             and n not in LEAN_BUILTINS], found)
            host = make_host(plugins)
            try:
                budget = budget_seconds(event.name, agent, env)
                called = set()
                for plugin_name, call in callers(host.plugins, index.HOOK,
                                                 order="registration"):
                    if due is not None and plugin_name not in due:
                        continue
                    left = max(BUDGET_FLOOR_SECONDS.get(event.name, 0.0),
                               budget - (clock() - started))
                    timed = msgspec.structs.replace(event, budget_seconds=left)
                    ok, _ = guarded(host.plugins, plugin_name, index.HOOK, call,
                                    event=timed, host=host)
                    if not ok:
                        fault("plugin_failed", "a plugin's hostcore_agent_event raised; "
                                               "the warning above names it")
                    else:
                        called.add(plugin_name)
                # A Stop the agent makes while already continuing for a Stop hook is
                # never gated: a gate that still objects would hold it in a loop.
                if not (event.name == "Stop" and event.stop_hook_active):
                    keep_working = run_gates(host, event, budget, started, clock, fault,
                                             due=due)
            finally:
                host.close()
            dispatch.housekeep(str(root), event.name, event.session_id,
                               called & set(throttled))
    except ConfigError as exc:
        # Its message names the config file and key, as every command says it.
        fault("config", str(exc))
    except Exception as exc:
        fault("internal", type(exc).__name__)
    asked = "\n\n".join(keep_working) if event_name == "Stop" else ""
    return HookOutcome(kinds, asked or None)


def run_gates(host: Host, event: AgentEvent, budget: float, started: float,
              clock: Callable[[], float], fault: Callable[[str, str], None],
              due: Collection[str] | None = None) -> list[str]:
    """Call every plugin's ``hostcore_agent_gate``; the messages of those asking the
    agent to keep working. A gate that raises, or answers something that is no
    verdict, is a ``gate_failed`` fault: a gate that cannot judge never blocks."""
    asked: list[str] = []
    for plugin_name, call in callers(host.plugins, index.GATE_HOOK, order="registration"):
        if due is not None and plugin_name not in due:
            continue
        left = max(0.0, budget - (clock() - started))
        try:
            ok, answers = guarded(host.plugins, plugin_name, index.GATE_HOOK, call,
                                  event=msgspec.structs.replace(event, budget_seconds=left),
                                  host=host)
        except Exception as exc:  # a built-in's own failure is re-raised by guarded
            log.warning("hook: the gate %s raised %s", plugin_name, type(exc).__name__)
            ok, answers = False, None
        # pluggy answers a plugin's call with the list of its non-None results.
        if not ok or not isinstance(answers, list) \
                or not all(isinstance(a, GateVerdict) for a in answers):
            fault("gate_failed", "a plugin's hostcore_agent_gate raised or answered no "
                                 "verdict; the agent goes on unblocked")
            continue
        for verdict in answers:
            for kind in verdict.faults:
                fault(kind, f"the gate {plugin_name} skipped an item")
            if verdict.keep_working:
                asked.append(verdict.keep_working)
    return asked

