"""The ``hostcore poll`` command.

A module-level click command; the built-in plugin in
:mod:`hostcore.workitems.plugin` adds it to the CLI.
"""

from __future__ import annotations

import click

from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host, stop_on_signals
from hostcore.workitems.poller import PollSummary


@click.command("poll")
@click.option("--once", is_flag=True, help="Run one cycle and exit (for cron).")
@json_option
@pass_host
def poll_command(host: Host, once: bool, as_json: bool) -> None:
    """Poll every work-item provider: list items, note changes, reconcile closures.

    With --once, one cycle, then exit 0, or 1 when a provider was unavailable or
    could not list. Without it, a cycle every [poll] interval_seconds until SIGINT
    or SIGTERM, which stop it after the current cycle.

    Keys of --json (one object per provider): provider, available, listing,
    scopes, listed, new, changed, commented, tracked_checks, ledger_checks,
    closures, errors, duration_ms.
    """
    if once:
        with host.step_lock():
            summaries = host.poller.cycle()
        _report(summaries, as_json)
        if any(not s.available or s.listing == "failed" for s in summaries):
            raise SystemExit(1)
        return
    stop = stop_on_signals()
    click.echo(f"hostcore: polling from {host.root} (Ctrl-C to stop)", err=True)
    while not stop.is_set():
        with host.step_lock():
            summaries = host.poller.cycle(stop)
        _report(summaries, as_json)
        stop.wait(host.config.settings.poll.interval_seconds)
    click.echo("hostcore: stopped", err=True)

def _report(summaries: list[PollSummary], as_json: bool) -> None:
    if as_json:
        emit_json(summaries)
        return
    if not summaries:
        click.echo("poll: no work-item provider is registered", err=True)
    for s in summaries:
        if not s.available:
            click.echo(f"poll: {s.provider}: unavailable: {s.errors[0]}", err=True)
            continue
        click.echo(
            f"poll: {s.provider}: listing {s.listing}, {s.listed} listed, {s.new} new, "
            f"{s.changed} changed, {s.closures} closed, {s.tracked_checks} tracked and "
            f"{s.ledger_checks} ledger-only checks, {len(s.errors)} error(s)", err=True)
        for error in s.errors:
            click.echo(f"poll: {s.provider}: {error}", err=True)
