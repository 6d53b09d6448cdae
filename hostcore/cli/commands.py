"""The host's own commands: ``plugins``, ``run``, ``status`` and ``config``.

Each domain's commands live beside its engine (``evidence``, ``purge`` and
``policy`` in :mod:`hostcore.evidence.commands`, and so on); these four are the
host's. ``plugins``, ``status`` and ``config`` only read: they run on a
read-only host and create nothing under the root.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import click

from hostcore.cli.render import status_lines, table_lines, tick_lines, value_text
from hostcore.cli.watch import DEFAULT_INTERVAL_SECONDS, watch_plain, watch_terminal
from hostcore.files import remove_stale_temps
from hostcore.host import Host
from hostcore.plugin.cli import (
    HostFactory,
    emit_json,
    emit_json_line,
    json_option,
    pass_host,
    stop_on_signals,
)
from hostcore.plugin.terminal import current, fit, paint, say, verbose_option
from hostcore.steps import StdoutGuard
from hostcore.tick import TickReport, drain

# How long `run` waits for the host to close before it exits with a step abandoned:
# the abandoned code may hold a lock the close needs (seconds).
CLOSE_GRACE_SECONDS = 5.0


@click.command("plugins")
@json_option
@verbose_option
@click.option("--traceback", "show_tb", is_flag=True, help="Show tracebacks of failed plugins.")
@pass_host(read_only=True)
def plugins_command(host: Host, as_json: bool, show_tb: bool) -> None:
    """List every plugin considered: built-in, loaded, failed or blocked.

    -v (before or after `plugins`) also lists what each plugin registers, and
    failed plugins' tracebacks.

    Keys of --json: name, distribution, version, status, hooks, registrations
    (kind, name, available, reason), error, traceback.
    """
    # Every plugin's command hook runs first, so one that raises is listed as failed.
    root = click.get_current_context().find_root().command
    check_commands = getattr(root, "check_plugin_commands", None)
    if callable(check_commands):
        check_commands()
    infos = host.plugin_infos()
    verbose = current().verbose > 0
    if as_json:
        emit_json(infos)
        return
    width, colors = current().width(), current().colors()
    for line in table_lines([(i.name, i.distribution or "-", i.version or "-", i.status)
                             for i in infos], ("NAME", "DISTRIBUTION", "VERSION", "STATUS"),
                            width, paint, state_column=3):
        click.echo(line, color=colors)
    for info in infos:
        if info.error:
            click.echo(fit(f"  {info.name}: {info.error}", width))
        if verbose:
            for reg in info.registrations:
                why = "" if reg.available else f" (unavailable: {reg.reason})"
                click.echo(fit(f"  {info.name}: {reg.kind} {reg.name}{why}", width))
    if show_tb or verbose:
        for info in infos:
            if info.traceback:
                click.echo(f"\n--- {info.name} ---\n{info.traceback}", err=True)


@click.command("run")
@click.option("--once", is_flag=True,
              help="Tick, and again at once while a worker has work pending, up to "
                   "[run] drain_seconds; then exit (for cron).")
@json_option
@click.pass_context
def run_command(ctx: click.Context, once: bool, as_json: bool) -> None:
    """Run the tick loop: ingest sources, run workers, poll providers.

    Prints one line per tick saying what changed (JSON Lines with --json);
    -q prints only the steps that failed.
    Without --once it ticks every [run] interval_seconds (sooner while a worker
    has pending work) until SIGINT or SIGTERM, which stop it after the current
    step. With --once it drains pending work for up to [run] drain_seconds and
    exits 0, or 1 naming each failed step. A step another process holds the
    lock for is waited on up to [run] lock_wait_seconds, then the command exits
    1 naming the holder. A step past its deadline, or still running 5 s after
    a signal, is abandoned: named, and the command exits 1 at once.
    """
    factory = ctx.find_object(HostFactory)
    if factory is None:
        raise click.UsageError("this command must run under the hostcore CLI")
    # What plugins print goes to stderr, from the host's build (its registration
    # hooks, its first event) on: stdout carries the reports alone.
    with StdoutGuard() as guard:
        _run(factory.get(), once, as_json, guard)


def _run(host: Host, once: bool, as_json: bool, guard: StdoutGuard) -> None:
    host.activity = "hostcore run --once" if once else "hostcore run"
    remove_stale_temps(host.root)  # left by a run killed mid-write
    settings = host.config.settings.run
    stop = stop_on_signals()
    quiet = current().quiet
    # -q keeps what went wrong (a failed or abandoned step) and drops the rest: the
    # progress line, each tick's summary, the start and stop notes.
    interactive = not as_json and not quiet and sys.stderr.isatty()
    show = _tick_printer(as_json, interactive, guard, quiet=quiet)
    if interactive:
        host.progress = lambda line: click.echo(f"\r\033[K{line}", err=True, nl=False)
    if once:
        # A cron run gives up (exit 1, naming the holder) rather than queue forever.
        host.lock_wait = settings.lock_wait_seconds
        with host.step_lock():
            pass  # fail fast, before any step, when another run holds the root
        reports = drain(host, settings.drain_seconds, stop, on_tick=show)
        if reports[-1].abandoned:
            _exit_abandoned(host, reports[-1])
        if reports[-1].pending:
            say("hostcore: work is still pending; the next run goes on with it", err=True)
        if not all(r.ok for r in reports):
            raise SystemExit(1)
        return
    say(f"hostcore: running on {host.root} (Ctrl-C to stop)", err=True)
    report = host.run(stop, on_tick=show)
    if report is not None and report.abandoned:
        _exit_abandoned(host, report)
    say("hostcore: stopped", err=True)
    if report is not None and not report.ok:
        raise SystemExit(1)


def _exit_abandoned(host: Host, report: TickReport) -> NoReturn:
    """Say which steps of ``report`` were abandoned, close the host (within
    :data:`CLOSE_GRACE_SECONDS`) and end the process with 1.

    The abandoned step's code still runs, holding the step lock: only the end of
    the process stops it and drops the lock together (see :mod:`hostcore.steps`).
    ``os._exit``, because interpreter shutdown would wait for the threads that
    code started, or trip over a stream it holds.
    """
    names = ", ".join(repr(step.name) for step in report.abandoned)
    click.echo(f"hostcore: stopped with step {names} abandoned; the step lock goes with "
               "the process", err=True)
    closing = threading.Thread(target=host.close, name="hostcore-close", daemon=True)
    closing.start()
    closing.join(CLOSE_GRACE_SECONDS)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


def _tick_printer(as_json: bool, interactive: bool, guard: StdoutGuard, *,
                  quiet: bool = False) -> Callable[[TickReport], None]:
    """Print each tick: one JSON line, or one line of text (over the progress line);
    under ``quiet`` only its failed steps (JSON is what the command reports: kept)."""

    def show(report: TickReport) -> None:
        if as_json:
            with guard.reports():
                emit_json_line({"ok": report.ok, "pending": report.pending,
                                "steps": report.steps, "duration_ms": report.duration_ms})
            return
        if interactive:
            click.echo("\r\033[K", err=True, nl=False)  # clear the progress line
        for step in report.failed:
            click.echo(f"hostcore: step {step.name!r} failed: {step.error}", err=True)
        if not quiet:
            click.echo(report.summary(), err=True)

    return show


@click.command("status")
@json_option
@verbose_option
@click.option("--watch", is_flag=True,
              help="Refresh the screen in place until Ctrl-C (plain blocks of lines when "
                   "stdout is not a terminal). Takes no lock: it runs beside `hostcore run`.")
@click.option("--interval", type=click.FloatRange(min=0.1, max=3600), default=None,
              metavar="SECONDS",
              help=f"Seconds between refreshes of --watch (default {DEFAULT_INTERVAL_SECONDS:g}).")
@pass_host(read_only=True)
def status_command(host: Host, as_json: bool, watch: bool, interval: float | None) -> None:
    """Show each component's state (and, when it is not ok, why and what fixes it),
    then the last tick this root ran, with its age and each step's counts.

    The text fits the terminal (COLUMNS): one line per component, zeros left
    out; -v lists every count. Keys of --json: root,
    components.<kind>.<name>.{available, reason, ...counts}, last_tick.{ok,
    age_seconds, duration_ms, pending, steps}, telemetry.sink_failures.

    --watch redraws it in place every --interval seconds, with the ticks seen
    and the last tick's rows, backlog and failures on top; Ctrl-C restores the
    terminal and exits 0.
    """
    if interval is not None and not watch:
        raise click.UsageError("--interval goes with --watch")
    if watch:
        if as_json:
            raise click.UsageError("--watch draws text; for JSON, run `status --json` "
                                   "when you need it")
        _watch(host, interval or DEFAULT_INTERVAL_SECONDS)
        return
    report = host.status()
    if as_json:
        emit_json(report)
        return
    terminal = current()
    if terminal.verbose:
        _status_details(report)
        return
    # click strips colour off a pipe by itself; --color always means keep it.
    colors = terminal.colors()
    for line in status_lines(report, terminal.width(), paint):
        click.echo(line, color=colors)


def _watch(host: Host, interval: float) -> None:
    if sys.stdout.isatty():
        watch_terminal(host, interval, paint, sys.stdout)
    else:
        watch_plain(host, interval, current().width, click.echo)


def _status_details(report: dict[str, Any]) -> None:
    """Every count of every component, one per line (``status -v``)."""
    for kind, section in report["components"].items():
        for name, entry in section.items():
            click.echo(f"{kind} {name}:")
            for key, value in entry.items():
                click.echo(f"  {key}: {value_text(value, every=True)}")
    for line in tick_lines(report, current().width()):
        click.echo(line)


@click.command("config")
@json_option
@pass_host(read_only=True)
def config_command(host: Host, as_json: bool) -> None:
    """Show the effective configuration and the file it came from."""
    data = host.config.to_builtins()
    if as_json:
        emit_json({"source": str(host.config.source) if host.config.source else None,
                   "settings": data})
        return
    # Only this text form needs json (TOML-like values); the common commands never load it.
    import json

    click.echo(f"# {host.config.origin}")
    for section, values in data.items():
        click.echo(f"[{section}]")
        for key, value in values.items():
            click.echo(f"{key} = {json.dumps(value)}")


COMMANDS = (plugins_command, run_command, status_command, config_command)

