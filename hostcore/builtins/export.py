"""Built-in: the ``export`` worker, the ``hostcore export`` command and their events.

The worker pushes at most :data:`RUN_ROWS` rows per tick to the
selected destination and reports ``pending`` while the feed has more. Its
``status()`` is the export's part of ``hostcore status``: the content axis as
counts (the destination's position, permitted rows not yet pushed) and the
governance axis as two rendered Divergences (see
:class:`hostcore.export.ExportReport`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from hostcore.errors import ConfigError, HostcoreError
from hostcore.export import Exporter, select_destination
from hostcore.markers import hookimpl
from hostcore.ref import GOVERNANCE
from hostcore.telemetry import EventSpec
from hostcore.types import WorkerResult

if TYPE_CHECKING:
    import click

    from hostcore.host import Host

EVENTS = (
    EventSpec(
        "export.pushed",
        {"rows": int, "batches": int, "governance": bool, "done": bool},
        "An export run ended: rows and pushes made, whether it carried a governance "
        "change to the destination, and whether it reached the end of the feed.",
    ),
    EventSpec(
        "export.conflict",
        {"component": GOVERNANCE},
        "A push carrying a governance change found that component moved at the "
        "destination since this host last saw it; nothing was written.",
    ),
)

# Rows one worker run pushes before handing the tick back (pending=True).
RUN_ROWS = 200_000

CONFLICT_HINT = (
    "`hostcore status` shows what moved. Once someone has decided, `hostcore export "
    "--adopt` takes the destination's values as the last contact and writes this host's "
    "over them."
)


class ExportWorker:
    """Pushes the export stream to the selected destination, one bounded slice a tick."""

    name = "export"
    order = 200

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
        summary = Exporter(host, select_destination(host)).run(max_rows=self.run_rows)
        return WorkerResult(pending=not summary.done,
                            counts={"rows": summary.rows, "batches": summary.batches})

    def status(self) -> dict[str, Any]:
        try:
            destination = select_destination(self.host)
        except ConfigError:
            return {}  # availability already says why
        return Exporter(self.host, destination).report().as_status()


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> ExportWorker:
    return ExportWorker(host)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # click is imported here, not at module level: building a Host must not load the CLI.
    import click

    from hostcore.cli import emit_json, json_option, pass_host
    from hostcore.export import ExportSummary
    from hostcore.ref import Conflict

    @cli.command("export")
    @click.option("--destination", "-d", "name", metavar="NAME",
                  help="The destination to push to (default: [plugins.export] destination, "
                       "else the only available one).")
    @click.option("--max-rows", type=click.IntRange(min=0), default=None,
                  help="Stop after pushing this many rows.")
    @click.option("--adopt", is_flag=True,
                  help="Resolve a conflict: take the destination's governance as the last "
                       "contact, then write this host's over it.")
    @json_option
    @pass_host
    def export_command(host: Host, name: str | None, max_rows: int | None, adopt: bool,
                       as_json: bool) -> None:
        """Push the rows the withholding policy permits to the export destination.

        Resumes from the destination's own position: after an interruption, run it
        again. Rows already pushed are never withdrawn by a later policy change.
        Exit 1 on a governance conflict (the message says what moved) or when the
        destination refuses the push, 2 when no destination is available.

        Keys of --json: destination, stream, rows, batches, position, carried,
        done, positions_dropped.
        """
        destination = select_destination(host, name)
        interactive = not as_json and sys.stderr.isatty()

        def show(summary: ExportSummary) -> None:
            click.echo(f"\rexported {summary.rows} row(s), position {summary.position}",
                       err=True, nl=False)

        with host.step_lock():
            try:
                summary = Exporter(host, destination).run(
                    max_rows=max_rows, adopt=adopt, progress=show if interactive else None)
            except HostcoreError as exc:  # a Conflict, or a destination that will not guess
                if interactive:
                    click.echo(err=True)
                click.echo(f"hostcore export: {exc}", err=True)
                if isinstance(exc, Conflict):
                    click.echo(CONFLICT_HINT, err=True)
                raise SystemExit(1) from None
        if as_json:
            emit_json(summary)
            return
        if interactive:
            click.echo("\r", err=True, nl=False)
        carried = f"; set {', '.join(summary.carried)}" if summary.carried else ""
        more = "" if summary.done else "; more rows remain"
        click.echo(f"exported {summary.rows} row(s) to {summary.destination} in "
                   f"{summary.batches} push(es), position {summary.position}{carried}{more}")
