"""The ``hostcore poll`` command.

A module-level click command; the built-in plugin in
:mod:`hostcore.workitems.plugin` adds it to the CLI.
"""

from __future__ import annotations

import threading
import time
from functools import partial

import click

from hostcore.files import LockBusy
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host, stop_on_signals
from hostcore.steps import run_command_step
from hostcore.workitems.plugin import poll_deadline
from hostcore.workitems.summary import PollSummary

# While waiting for the step lock, or for the next cycle, look at the stop event (and
# re-read the config file) this often, so SIGTERM is honoured and an edited interval
# is picked up within about a second.
WAIT_SLICE_SECONDS = 1.0


@click.command("poll")
@click.option("--once", is_flag=True, help="Run one cycle and exit (for cron).")
@json_option
@pass_host(guard_stdout=True)
def poll_command(host: Host, once: bool, as_json: bool) -> None:
    """Poll every work-item provider: list items, note changes, reconcile closures.

    With --once, one cycle, then exit 0, or 1 when a configured scope failed or was
    interrupted (not by the provider's page cap) or was rate-limited, a listing
    raised, a configured provider was unavailable, a closure or relocation question
    fails (until it is answered), the ledger could not be written, a stop signal
    cut the cycle short, or the cycle was abandoned past the poll step's deadline or
    a provider called sys.exit(); each is named on stderr. A provider that is merely not
    configured is reported as unconfigured and does not fail the run. When another
    process holds the root's step lock, --once waits up to [run] lock_wait_seconds,
    then exits 1 naming the holder.

    Without --once, a cycle every [poll] interval_seconds (re-read from the
    config file while it waits) until SIGINT or SIGTERM. Each cycle spends at
    most [poll] cycle_budget_seconds asking providers; a stop signal ends a cycle
    within about two seconds (the gh provider kills a running gh).

    Keys of --json (one object per provider): provider, available, configured,
    listing, scopes, unlisted, listed, new, changed, commented, tracked_checks,
    ledger_checks, closures, moved, paused, future_stamps, tracked_stopped_at, failing,
    deferred, gone, held, capped, unresolved, budget_spent, ledger_error, errors,
    duration_ms.
    """
    stop = stop_on_signals()
    if once:
        host.activity = "hostcore poll --once"
        summaries = _cycle(host, stop, host.config.settings.run.lock_wait_seconds)
        if summaries is None:
            click.echo("hostcore: poll: stopped before the cycle ran", err=True)
            raise SystemExit(1)
        _report(summaries, as_json)
        failed = [f"{s.provider}: {', '.join(found)}" for s in summaries
                  if (found := s.failures())]
        if stop.is_set():
            failed.append("stopped before the cycle finished")
        if failed:
            click.echo(f"hostcore: poll: not everything was polled: {'; '.join(failed)}",
                       err=True)
            raise SystemExit(1)
        return
    host.activity = "hostcore poll"
    click.echo(f"hostcore: polling from {host.root} (Ctrl-C to stop)", err=True)
    while not stop.is_set():
        started = time.monotonic()
        summaries = _cycle(host, stop, None)
        if summaries is None:
            break
        _report(summaries, as_json)
        _wait_for_next_cycle(host, stop, started)
    click.echo("hostcore: stopped", err=True)


def _cycle(host: Host, stop: threading.Event, wait: float | None) -> list[PollSummary] | None:
    """One cycle under the step lock, waiting for it up to ``wait`` seconds (``None``:
    until a stop). Returns ``None`` when a stop came first; raises
    :class:`~hostcore.files.LockBusy` naming the holder when the wait ran out."""
    started = time.monotonic()
    while not stop.is_set():
        waited = time.monotonic() - started
        timeout = WAIT_SLICE_SECONDS if wait is None \
            else max(0.0, min(WAIT_SLICE_SECONDS, wait - waited))
        try:
            # Supervised as the tick's poll step is: a provider that hangs is
            # abandoned past the step's deadline, and one that calls sys.exit() fails
            # the command (StepAbandoned, CommandStepFailed) instead of ending it.
            found = run_command_step(
                "poll", lambda: host.poller.cycle(stop),
                lock=partial(host.step_lock, timeout=timeout),
                scope=host.root, deadline=poll_deadline(host), stop=stop)
        except LockBusy as busy:
            if wait is not None and time.monotonic() - started >= wait:
                raise LockBusy(busy.path, busy.holder, wait) from None
            continue
        return found if isinstance(found, list) else None  # None: stopped before it ran
    return None


def _wait_for_next_cycle(host: Host, stop: threading.Event, started: float) -> None:
    """Wait until ``[poll] interval_seconds`` after ``started``, re-reading the config
    file every slice so an edited interval counts from the cycle that began."""
    while not stop.is_set():
        left = started + host.reload_settings().poll.interval_seconds - time.monotonic()
        if left <= 0:
            return
        stop.wait(min(left, WAIT_SLICE_SECONDS))


def _report(summaries: list[PollSummary], as_json: bool) -> None:
    if as_json:
        emit_json(summaries)
        return
    if not summaries:
        click.echo("poll: no work-item provider is registered", err=True)
    for s in summaries:
        if not s.available:
            state = "unavailable" if s.configured else "unconfigured"
            click.echo(f"poll: {s.provider}: {state}: {s.errors[0]}", err=True)
            continue
        moved = f", {s.moved} moved" if s.moved else ""
        paused = f", {s.paused} paused" if s.paused else ""
        failing = f", {s.failing} failing ({s.deferred} waiting on a backoff)" \
            if s.failing else ""
        held = f", {s.held} never-seen held" if s.held else ""
        click.echo(
            f"poll: {s.provider}: listing {s.listing}, {s.listed} listed, {s.new} new, "
            f"{s.changed} changed, {s.closures} closed{moved}, {s.tracked_checks} tracked and "
            f"{s.ledger_checks} ledger-only checks{paused}{failing}{held}, "
            f"{len(s.errors)} error(s)", err=True)
        for error in s.errors:
            click.echo(f"poll: {s.provider}: {error}", err=True)
        if s.budget_spent:
            click.echo(f"poll: {s.provider}: the cycle's time budget ran out; the rest "
                       "waits for the next cycle", err=True)
