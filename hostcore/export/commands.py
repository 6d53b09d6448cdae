"""The ``hostcore export`` command.

A module-level click command; the built-in plugin in
:mod:`hostcore.export.plugin` adds it to the CLI.
"""

from __future__ import annotations

import sys

import click

from hostcore.errors import HostcoreError
from hostcore.export.exporter import Exporter, ExportSummary, select_destination
from hostcore.export.plugin import CONFLICT_HINT
from hostcore.export.ref import Conflict
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host


@click.command("export")
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
