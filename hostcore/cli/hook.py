"""``hostcore hook``'s lean path: the event handled without building the click application.

A hook runs on every tool call an agent makes, so its start is what an agent
waits for. :mod:`hostcore.__main__` hands an argument list of the form
``[--root R] [--config C] [-v] hook --agent A`` (what ``hostcore hooks install``
writes) to :func:`main` before anything else loads; click, the evidence store and
every plugin that does not implement ``hostcore_agent_event`` stay unloaded. Any
other form (``hook --help``, an option this parser does not know) returns
``None`` from :func:`parse` and goes through the full command line, where the
``hook`` command does the same.

Module level imports only the standard library: :mod:`hostcore.__main__` imports
this module for every command.
"""

from __future__ import annotations

import os
import sys
import time

from hostcore.cli import argv

# Not typing's: typing would cost every hook run (mypy reads this constant as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


class HookArgs:
    """The options of a ``hook`` invocation (a plain class: a NamedTuple imports typing)."""

    __slots__ = ("agent", "config", "root", "verbose")

    def __init__(self, root: str | None, config: str | None, verbose: int,
                 agent: str | None) -> None:
        self.root = root
        self.config = config
        self.verbose = verbose
        self.agent = agent

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookArgs) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"HookArgs{self._fields()!r}"

    def _fields(self) -> tuple[str | None, str | None, int, str | None]:
        return (self.root, self.config, self.verbose, self.agent)


def parse(args: list[str]) -> HookArgs | None:
    """The ``hook`` invocation in ``args``, or ``None`` for anything else."""
    found = argv.split(args)
    if found is None or found.command != "hook":
        return None
    agent = None
    rest = found.rest
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name != "--agent":
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        agent = value
    return HookArgs(found.root, found.config, found.verbose, agent)


def process_age() -> float:
    """Seconds since this process started (0 where ``/proc`` cannot say): an event's
    budget counts the interpreter's own start, which the agent's timeout counts too."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, after the name
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def main(parsed: HookArgs) -> int:
    """Handle the event on stdin; 0, or 2 when a gate asks the agent to keep working
    (every fault is noted, never returned)."""
    started = time.monotonic() - process_age()
    # Most events give no plugin work (a tool call outside every plugin's interest, a
    # refresh inside its interval): the dispatcher proves it with the standard
    # library, and the host is built only when a plugin is due, and one of them has
    # no lean handler for the event (or it raised: that plugin then runs here too).
    from hostcore.agents import dispatch

    data, oversized = dispatch.read_input(sys.stdin.buffer)
    decision = None if oversized else dispatch.decide(parsed.root, parsed.agent, data,
                                                      os.environ)
    if decision is not None and not decision.due:
        return 0
    handlers = None if decision is None else dispatch.lean_handlers(decision)
    lean_failed: list[str] | None = None
    if decision is not None and handlers is not None:
        import gc

        from hostcore.agents import lean_path

        assert parsed.agent is not None  # decide() vouched for it
        # The cyclic collector would only walk the modules the handlers import.
        gc.disable()
        try:
            lean_failed = lean_path.run(decision, handlers, agent=parsed.agent,
                                        config=parsed.config, env=os.environ,
                                        started=started)
        finally:
            gc.enable()
        if lean_failed == []:
            return 0
    import logging

    from hostcore.agents.hook import handle_input
    from hostcore.errors import ConfigError
    from hostcore.host import Host, prepare_root, resolve_root
    from hostcore.plugin.loader import PluginSet

    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][
        min(parsed.verbose, 2)], format=argv.LOG_FORMAT)
    env = os.environ

    def root_for() -> Path:
        if parsed.root is not None and not parsed.root.strip():
            raise ConfigError("--root is empty")
        return prepare_root(resolve_root(parsed.root, env), read_only=False)

    def make_host(root: Path, plugins: PluginSet) -> Host:
        return Host(root=root, config=parsed.config, env=env, plugin_set=plugins)

    outcome = handle_input(data, oversized, agent=parsed.agent, root_for=root_for,
                           env=env, make_host=make_host, started=started,
                           lean_failed=lean_failed or ())
    return outcome.answer(sys.stderr)
