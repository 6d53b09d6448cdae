"""Built-in: agent hooks' plugin face.

* the ``agent-hooks`` worker (order 1000, after every other): each tick it takes
  the hook faults noted since the last one (:mod:`hostcore.agents.faults`) and fails its step naming
  their kinds, so ``run --once`` exits 1 after a hook had to swallow a fault; its
  ``status()`` shows every kind's count;
* the ``hook`` and ``hooks`` commands (defined in :mod:`hostcore.agents.commands`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.errors import HostcoreError
from hostcore.plugin import fault_counts
from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    from pathlib import Path

    import click

    from hostcore.host import Host
    from hostcore.plugin.registration import WorkerResult


class HookFaults(HostcoreError):
    """Agent hooks met faults since the last tick (each was swallowed, the agent went
    on); the message gives the kinds and counts."""


class AgentHooksWorker:
    """Reports the faults ``hostcore hook`` runs noted, once each."""

    name = "agent-hooks"
    order = 1000  # last: a tick reports its own work first

    def __init__(self, root: Path) -> None:
        self._root = root

    def run(self, host: Host) -> WorkerResult:
        # Imported here, as in status(): a hook loads this plugin and needs neither.
        from hostcore.agents import faults

        return fault_counts.report_new(faults.take_unreported(host.root), HookFaults,
                                       "agent hook fault(s)",
                                       "each agent went on, `hostcore status` counts them")

    def status(self) -> dict[str, object]:
        from hostcore.agents import faults

        return fault_counts.status(faults.faults(self._root))


@hookimpl
def hostcore_workers(host: Host) -> AgentHooksWorker:
    return AgentHooksWorker(host.root)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # Command code loads only when a plugin command is looked up (RootGroup, cli/app.py).
    from hostcore.agents.commands import hook_command, hooks_group

    cli.add_command(hook_command)
    cli.add_command(hooks_group)
