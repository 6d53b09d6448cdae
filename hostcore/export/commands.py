"""The ``hostcore export`` command.

A module-level click command; the built-in plugin in
:mod:`hostcore.export.plugin` adds it to the CLI.
"""

from __future__ import annotations

import sys
import time

import click

from hostcore.errors import HostcoreError
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import Exporter, ExportSummary, adopt_hint
from hostcore.export.plugin import CONFLICT_HINT, EXPORT_DEADLINE_SECONDS
from hostcore.export.ref import GOVERNANCE
from hostcore.files import LockBusy
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore.steps import run_command_step


def _leases(ctx: click.Context, param: click.Parameter,
            values: tuple[str, ...]) -> dict[str, str]:
    """``COMPONENT=PREFIX`` arguments as a mapping; a bad one is a usage error."""
    leases: dict[str, str] = {}
    for value in values:
        component, sep, prefix = value.partition("=")
        if not sep or component not in GOVERNANCE or not prefix or not prefix.isprintable():
            raise click.BadParameter(
                f"{value!r}: expected COMPONENT=PREFIX, COMPONENT one of "
                f"{', '.join(GOVERNANCE)} and PREFIX the start of the destination's value "
                "(as `hostcore status` or the conflict shows it)")
        if component in leases:
            raise click.BadParameter(f"{component} is named twice")
        leases[component] = prefix
    return leases


@click.command("export")
@click.option("--destination", "-d", "name", metavar="NAME",
              help="The destination to push to (default: [plugins.export] destination, "
                   "else the only available one).")
@click.option("--max-rows", type=click.IntRange(min=0), default=None,
              help="Stop after pushing this many rows.")
@click.option("--adopt", "adopt", metavar="COMPONENT=PREFIX", multiple=True,
              callback=_leases,
              help="Resolve a conflict: write this host's value over the destination's "
                   "value starting with PREFIX; refused if the destination holds another "
                   "(it moved since you looked). Repeat for several components.")
@json_option
@pass_host(guard_stdout=True)
def export_command(host: Host, name: str | None, max_rows: int | None,
                   adopt: dict[str, str], as_json: bool) -> None:
    """Push the rows the withholding policy permits to the export destination.

    Resumes from the destination's own position: after an interruption, run it
    again. Rows already pushed are never withdrawn by a later policy change.
    Exit 1 when a governance conflict stands (content was still pushed; the
    message says what moved and how to adopt), when --adopt names a value the
    destination no longer holds, when the destination refuses the push, raises,
    calls sys.exit() or hangs (no batch pushed for 900 s; its code is then left
    running and the command exits); 2 when no destination is available.

    Keys of --json: destination, stream, rows, batches, position, carried,
    done, positions_dropped, conflicts, resumed, cache_saved.
    """
    destination = select_destination(host, name)
    interactive = not as_json and sys.stderr.isatty()
    pushed = [time.monotonic()]  # when the latest batch went out: the step's progress

    def show(summary: ExportSummary) -> None:
        pushed[0] = time.monotonic()
        if interactive:
            click.echo(f"\rexported {summary.rows} row(s), position {summary.position}",
                       err=True, nl=False)

    def push() -> ExportSummary:
        return Exporter(host, destination).run(max_rows=max_rows, adopt=adopt, progress=show)

    # Supervised as the tick's export step is: a destination that hangs is abandoned
    # once no batch went out for EXPORT_DEADLINE_SECONDS, and one that calls
    # sys.exit() fails the command instead of ending it with its own status.
    try:
        done = run_command_step("export", push, lock=host.step_lock, scope=host.root,
                                deadline=EXPORT_DEADLINE_SECONDS, progress=lambda: pushed[0])
    except HostcoreError as exc:  # a refused adoption, a destination that will not guess
        if interactive:
            click.echo(err=True)
        if isinstance(exc, LockBusy):
            raise  # named as every command names a held lock
        click.echo(f"hostcore export: {exc}", err=True)
        raise SystemExit(1) from None
    assert isinstance(done, ExportSummary)  # no stop request: it ran
    summary = done
    if as_json:
        emit_json(summary)
    else:
        if interactive:
            click.echo("\r", err=True, nl=False)
        carried = f"; set {', '.join(summary.carried)}" if summary.carried else ""
        more = "" if summary.done else "; more rows remain"
        click.echo(f"exported {summary.rows} row(s) to {summary.destination} in "
                   f"{summary.batches} push(es), position {summary.position}{carried}{more}")
        if not summary.cache_saved:
            click.echo("hostcore export: the ref cache could not be written; the next run "
                       "negotiates with the destination again", err=True)
    conflict = summary.conflict()
    if conflict is not None:
        click.echo(f"hostcore export: {conflict}", err=True)
        click.echo(f"{CONFLICT_HINT} Here: hostcore export {adopt_hint(summary.conflicts)}",
                   err=True)
        raise SystemExit(1)
