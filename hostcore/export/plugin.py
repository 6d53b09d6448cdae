"""Built-in: the ``export`` worker, the ``hostcore export`` command and their events.

The worker pushes at most :data:`RUN_ROWS` rows per tick to the
selected destination and reports ``pending`` while the feed has more. A tick
inside the back-off after a failed run contacts nothing and is not a failed
step: it counts ``deferred: 1``. Its
``status()`` is the export's part of ``hostcore status``: the content axis as
counts (the destination's position, permitted rows not yet pushed) and the
governance axis as two rendered Divergences (see
:class:`hostcore.export.ExportReport`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hostcore.errors import ConfigError
from hostcore.export.destinations import select_destination
from hostcore.export.ref import GOVERNANCE
from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import WorkerResult
from hostcore.telemetry import EventSpec

if TYPE_CHECKING:
    import click

    from hostcore.host import Host

EVENTS = (
    EventSpec(
        "export.pushed",
        {"rows": int, "batches": int, "governance": bool, "done": bool, "conflicts": int,
         "resumed": int},
        "An export run ended: rows and pushes made, whether it carried a governance "
        "change to the destination, whether it reached the end of the feed, the "
        "governance components held back by a conflict, and how many times the "
        "destination changed under the run and it resumed from the destination's position.",
    ),
    EventSpec(
        "export.conflict",
        {"component": GOVERNANCE},
        "This host's value for a governance component and the destination's differ, and "
        "neither is the one they last agreed on: the write is held back (content keeps "
        "flowing) until one side changes or someone adopts. Emitted once per conflict.",
    ),
)

# Rows one worker run pushes before handing the tick back (pending=True).
RUN_ROWS = 200_000
# How long an export step may run before the tick abandons it (seconds): RUN_ROWS
# rows to a slow destination.
EXPORT_DEADLINE_SECONDS = 900.0

CONFLICT_HINT = (
    "Content is still exported; only these governance writes are held back. `hostcore "
    "status` shows what moved. Once someone has decided that this host's value stands, "
    "`hostcore export --adopt COMPONENT=PREFIX` (PREFIX: the start of the destination's "
    "value, as shown) writes it over exactly that value, and refuses if it moved again."
)


class ExportWorker:
    """Pushes the export stream to the selected destination, one bounded slice a tick."""

    name = "export"
    order = 200
    deadline_seconds = EXPORT_DEADLINE_SECONDS

    def __init__(self, host: Host, *, run_rows: int = RUN_ROWS) -> None:
        self.host = host
        self.run_rows = run_rows

    def availability(self) -> str | None:
        try:
            select_destination(self.host)
        except ConfigError as exc:
            return str(exc)
        return None

    def run(self, host: Host) -> WorkerResult:
        # The engine loads when it runs.
        from hostcore.export.exporter import ExportDeferred, Exporter

        try:
            summary = Exporter(host, select_destination(host)).run(max_rows=self.run_rows)
        except ExportDeferred:
            # The host's own back-off, not a new failure: the attempt that failed already
            # failed its tick (cron saw exit 1 then), and failing each tick of the wait
            # would say nothing new. Not pending either: a tick at once would only wait
            # again. `status` shows the standing back-off and its next attempt.
            return WorkerResult(counts={"deferred": 1})
        # A conflict is not a failed step: content went out, and the conflict is in
        # status and announced once; failing every tick would say nothing new.
        return WorkerResult(pending=not summary.done,
                            counts={"rows": summary.rows, "batches": summary.batches,
                                    "conflicts": len(summary.conflicts)})

    def status(self) -> dict[str, Any]:
        try:
            destination = select_destination(self.host)
        except ConfigError:
            return {}  # availability already says why
        # The engine loads only with a destination: status on a root without one skips it.
        from hostcore.export.exporter import Exporter

        return Exporter(self.host, destination).report().as_status()


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> ExportWorker:
    return ExportWorker(host)


# The commands this plugin adds: name -> ("module:attribute", one-line help).
# hostcore's command line lists them from here and imports a command's module only
# when that command runs (RootGroup, cli/app.py); the hook below gives any other
# group (an embedder's, the conformance kit's) the commands themselves.
DECLARED_COMMANDS = {
    "export": ("hostcore.export.commands:export_command",
               "Push the rows the withholding policy permits to the export destination."),
}


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # The command modules load now, when a group asks for them: the host builds this
    # plugin on every start, and commands seldom run.
    add_declared(cli, DECLARED_COMMANDS)
