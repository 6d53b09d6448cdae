"""What one ``hostcore hook`` run does with the event on its stdin.

The run reads stdin (at most :data:`~hostcore.agents.events.MAX_INPUT_BYTES` kept;
the rest is read and dropped, so the agent's write never fails), decodes it into
an :class:`~hostcore.agents.events.AgentEvent`, loads a lean plugin set (the
built-ins :data:`LEAN_BUILTINS` and only the plugins the index names, see
:mod:`hostcore.agents.index`), builds a host on it and calls every plugin's
``hostcore_agent_event`` on its own (:mod:`hostcore.plugin.calls`). Whatever goes
wrong is a fault: noted under the root by kind (:mod:`hostcore.agents.faults`),
logged on stderr, and the run still exits 0: an agent is never held up or told
its hook failed for a fault of hostcore's. Exit 2, which asks an agent to go on
working, is kept for a gate that means it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from hostcore.agents import index
from hostcore.agents.events import AGENTS, MAX_INPUT_BYTES, EventRefused, decode_event
from hostcore.errors import ConfigError
from hostcore.plugin.calls import callers, guarded, plugin_output
from hostcore.plugin.loader import ENV_ALLOW, PluginSet, load_plugins

if TYPE_CHECKING:
    from hostcore.host import Host

log = logging.getLogger("hostcore.agents.hook")

# The built-ins a hook loads: the core's events (every host emits one) and this
# domain's own plugin. Evidence, export and work items are never loaded by a hook.
LEAN_BUILTINS = ("hostcore.plugin.core", "hostcore.agents.plugin")
# What a hook run may spend, counted from its process's start, by event (seconds).
# Stop reads a session's transcript; SessionEnd's comes from the agent's own limit.
BUDGET_SECONDS = {"Stop": 1.0}
DEFAULT_BUDGET_SECONDS = 0.5
# What all SessionEnd hooks get together: Claude Code 1.5 s unless raised with its
# variable (milliseconds), Codex 3 s.
SESSION_END_LIMIT_SECONDS = {"claude-code": 1.5, "codex": 3.0}
SESSION_END_LIMIT_ENV = "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS"
# What a SessionEnd leaves of that limit for the other plugins' work and the exit (on
# a busy machine, about half of Claude Code's 1.5 s).
SESSION_END_MARGIN_SECONDS = 0.8
_CHUNK = 1 << 16


def read_input(stream: BinaryIO, limit: int = MAX_INPUT_BYTES) -> tuple[bytes, bool]:
    """Stdin up to ``limit`` bytes, and whether there was more (read and dropped)."""
    kept: list[bytes] = []
    size = 0
    oversized = False
    while chunk := stream.read(_CHUNK):
        if oversized or size + len(chunk) > limit:
            oversized = True
            continue
        kept.append(chunk)
        size += len(chunk)
    return b"".join(kept), oversized


def lean_plugins(root: Path, env: Mapping[str, str]) -> PluginSet:
    """The plugins a hook loads: :data:`LEAN_BUILTINS` and the index's plugins, the
    index rebuilt first when the installed plugins changed."""
    expected = index.signature(env)
    names = index.cached(root, expected)
    if names is None:
        names = rebuild_index(root, env, expected)
    # The index was made under the user's allow and block lists: its names are
    # allowed, and the block list still applies.
    return load_plugins(LEAN_BUILTINS, (), load_entrypoints=True,
                        env={**env, ENV_ALLOW: ",".join(names)})


def rebuild_index(root: Path, env: Mapping[str, str], expected: str | None = None
                  ) -> tuple[str, ...]:
    """Load every plugin once and cache the names of those implementing the hook."""
    every = load_plugins(LEAN_BUILTINS, (), load_entrypoints=True, env=env)
    names = index.implementers(every)
    index.write(root, index.PluginIndex(expected or index.signature(env), names))
    return names


def handle_stdin(stream: BinaryIO, *, agent: str | None, root_for: Callable[[], Path],
                 env: Mapping[str, str], make_host: Callable[[Path, PluginSet], Host],
                 started: float) -> list[str]:
    """Read the event on ``stream`` and handle it (:func:`run_hook`) under the root
    ``root_for()`` makes ready; a root that cannot be used is said on stderr, as
    nothing can be noted under it. Returns the kinds of the faults noted."""
    data, oversized = read_input(stream)
    try:
        root = root_for()
    except (ConfigError, OSError) as exc:
        log.warning("hook: %s; the event was dropped", exc)
        return ["root"]
    return run_hook(agent=agent, data=data, oversized=oversized, root=root, env=env,
                    make_host=lambda plugins: make_host(root, plugins), started=started)


def budget_seconds(event: str, agent: str, env: Mapping[str, str]) -> float:
    """What a hook run for ``event`` may spend, from its process's start (seconds)."""
    if event != "SessionEnd":
        return BUDGET_SECONDS.get(event, DEFAULT_BUDGET_SECONDS)
    limit = SESSION_END_LIMIT_SECONDS.get(agent, SESSION_END_LIMIT_SECONDS["claude-code"])
    raised = env.get(SESSION_END_LIMIT_ENV, "") if agent == "claude-code" else ""
    if raised.strip().isdigit():
        limit = int(raised) / 1000
    return max(0.0, limit - SESSION_END_MARGIN_SECONDS)


def run_hook(*, agent: str | None, data: bytes, oversized: bool, root: Path,
             env: Mapping[str, str], make_host: Callable[[PluginSet], Host],
             started: float, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Handle one event; returns the kinds of the faults it noted (none when all went
    well). Never raises for a fault: each is noted under ``root`` and logged."""
    kinds: list[str] = []
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
        return kinds
    if oversized:
        fault("oversized", f"stdin is larger than {MAX_INPUT_BYTES} bytes")
        return kinds
    try:
        event = decode_event(data, agent, budget_seconds=0.0)
    except EventRefused as exc:
        fault(exc.kind, str(exc).partition(": ")[2])
        return kinds
    event_name = event.name
    try:
        with plugin_output():  # stdout is the agent's: nothing but hook JSON goes there
            host = make_host(lean_plugins(root, env))
            try:
                budget = budget_seconds(event.name, agent, env)
                for plugin_name, call in callers(host.plugins, index.HOOK,
                                                 order="registration"):
                    left = max(0.0, budget - (clock() - started))
                    timed = msgspec.structs.replace(event, budget_seconds=left)
                    ok, _ = guarded(host.plugins, plugin_name, index.HOOK, call,
                                    event=timed, host=host)
                    if not ok:
                        fault("plugin_failed", "a plugin's hostcore_agent_event raised; "
                                               "the warning above names it")
            finally:
                host.close()
    except Exception as exc:
        fault("internal", type(exc).__name__)
    return kinds

