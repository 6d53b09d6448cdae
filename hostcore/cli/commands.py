"""The host's own commands: ``plugins``, ``run``, ``status`` and ``config``.

Each domain's commands live beside its engine (``evidence``, ``purge`` and
``policy`` in :mod:`hostcore.evidence.commands`, and so on); these four are the
host's. ``plugins``, ``status`` and ``config`` only read: they run on a
read-only host and create nothing under the root.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from hostcore.cli.render import status_lines, table_lines, tick_lines, value_text
from hostcore.cli.running import run_ticks
from hostcore.cli.watch import DEFAULT_INTERVAL_SECONDS, watch_plain, watch_terminal
from hostcore.host import Host
from hostcore.plugin.cli import HostFactory, emit_json, json_option, pass_host
from hostcore.plugin.terminal import current, fit, paint, verbose_option
from hostcore.steps import StdoutGuard


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
    with StdoutGuard():  # what plugin code prints goes to stderr: stdout is the listing
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
        run_ticks(factory.get(), once=once, as_json=as_json, guard=guard,
                  quiet=current().quiet, echo=click.echo)


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
    with StdoutGuard():  # what plugins' status hooks print goes to stderr
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

