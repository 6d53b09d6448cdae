"""The ``hostcore`` command line: a thin face over :class:`~hostcore.host.Host`.

Exit status: 0 success; 1 a step (or a strict plugin load) failed; 2 bad usage
or configuration. Every command that lists or reports takes ``--json``; its keys
are stable and documented in ``docs/cli.md``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import update_wrapper
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from hostcore import __version__
from hostcore.builtins import BUILTIN_PLUGINS
from hostcore.errors import ConfigError, PluginLoadError
from hostcore.host import Host, TickReport
from hostcore.plugins import PluginSet, load_plugins

F = TypeVar("F", bound=Callable[..., Any])

LOG_FORMAT = "hostcore: %(levelname)s: %(message)s"


class HostFactory:
    """Builds the Host on first use, so ``--help`` works even with a bad config."""

    def __init__(self, plugin_set: PluginSet, env: dict[str, str]) -> None:
        self.plugin_set = plugin_set
        self.env = env
        self.root: Path | None = None
        self.config: Path | None = None
        self._host: Host | None = None

    def get(self) -> Host:
        if self._host is None:
            self._host = Host(root=self.root, config=self.config, env=self.env,
                              plugin_set=self.plugin_set)
        return self._host

    def close(self) -> None:
        if self._host is not None:
            self._host.close()


def pass_host(f: F) -> F:
    """Decorate a click command to receive the :class:`Host` as its first argument."""

    @click.pass_context
    def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        return ctx.invoke(f, ctx.find_object(HostFactory).get(), *args, **kwargs)

    return update_wrapper(wrapper, f)  # type: ignore[return-value]


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON (stable keys) instead of a table.")(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(msgspec.to_builtins(data), indent=2, sort_keys=True))


def print_table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    """A plain, aligned text table."""
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set: loops check it between steps and stop cleanly."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def build_cli(plugin_set: PluginSet) -> click.Group:
    """The root command group, with built-in and plugin subcommands attached."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="hostcore")
    @click.option("--root", type=click.Path(file_okay=False, path_type=Path),
                  envvar="HOSTCORE_ROOT", show_envvar=True,
                  help="State root folder (default: the platform's user data dir).")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                  help="TOML config file (default: <root>/hostcore.toml if present).")
    @click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
    @click.pass_context
    def cli(ctx: click.Context, root: Path | None, config_path: Path | None,
            verbose: int) -> None:
        """hostcore: a small plugin host for the local side of coding-agent infrastructure.

        It ingests evidence from sources, keeps it in an embedded store under one
        state root, polls work-item providers and runs plugin workers on a tick.
        Start with `hostcore run --once`, then `hostcore status`.
        """
        level = [logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)]
        logging.getLogger().setLevel(level)
        factory = ctx.ensure_object(HostFactory)
        factory.root, factory.config = root, config_path
        ctx.call_on_close(factory.close)

    for command in (plugins_command, run_command, status_command, config_command):
        cli.add_command(command)
    plugin_set.pm.hook.hostcore_commands(cli=cli)
    return cli


@click.command("plugins")
@json_option
@click.option("--traceback", "show_tb", is_flag=True, help="Show tracebacks of failed plugins.")
@pass_host
def plugins_command(host: Host, as_json: bool, show_tb: bool) -> None:
    """List every plugin considered: built-in, loaded, failed or blocked.

    Keys of --json: name, distribution, version, status, hooks, registrations
    (kind, name, available, reason), error, traceback.
    """
    infos = host.plugin_infos()
    if as_json:
        emit_json(infos)
        return
    rows = []
    for info in infos:
        regs = ", ".join(f"{r.kind}:{r.name}" + ("" if r.available else " (unavailable)")
                         for r in info.registrations)
        rows.append((info.name, info.distribution or "-", info.version or "-", info.status,
                     regs or "-", info.error or ""))
    print_table(rows, ("NAME", "DISTRIBUTION", "VERSION", "STATUS", "REGISTERS", "ERROR"))
    if show_tb:
        for info in infos:
            if info.traceback:
                click.echo(f"\n--- {info.name} ---\n{info.traceback}", err=True)


@click.command("run")
@click.option("--once", is_flag=True, help="Run one tick and exit (for cron).")
@json_option
@pass_host
def run_command(host: Host, once: bool, as_json: bool) -> None:
    """Run the tick loop: ingest sources, run workers, poll providers.

    Without --once it ticks every [run] interval_seconds (sooner while a worker has
    pending work) until SIGINT or SIGTERM, which stop it after the current step.
    With --once it exits 0, or 1 naming each failed step.
    """
    if once:
        report = host.tick()
        _print_tick(report, as_json)
        if not report.ok:
            raise SystemExit(1)
        return
    stop = stop_on_signals()
    click.echo(f"hostcore: running on {host.root} (Ctrl-C to stop)", err=True)
    report = host.run(stop)
    click.echo("hostcore: stopped", err=True)
    if report is not None and not report.ok:
        raise SystemExit(1)


def _print_tick(report: TickReport, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": report.ok, "pending": report.pending, "steps": report.steps,
                   "duration_ms": report.duration_ms})
        return
    for step in report.failed:
        click.echo(f"hostcore: step {step.name!r} failed: {step.error}", err=True)
    ran = sum(not s.skipped for s in report.steps)
    state = "ok" if report.ok else f"{len(report.failed)} failed"
    pending = ", work pending" if report.pending else ""
    click.echo(f"tick {state}: {ran} step(s) in {report.duration_ms} ms{pending}", err=True)


@click.command("status")
@json_option
@pass_host
def status_command(host: Host, as_json: bool) -> None:
    """Show what each component reports: counts, availability, progress.

    Keys of --json: root, components.<kind>.<name>.{available, reason, ...counts},
    telemetry.sink_failures.
    """
    report = host.status()
    if as_json:
        emit_json(report)
        return
    click.echo(f"root: {report['root']}")
    for kind, section in report["components"].items():
        click.echo(f"{kind}:")
        for name, entry in section.items():
            click.echo(f"  {name}:")
            for key, value in entry.items():
                click.echo(f"    {key}: {_render(value)}")
    failures = report["telemetry"]["sink_failures"]
    if failures:
        click.echo(f"telemetry sink failures: {_render(failures)}")


def _render(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_render(v)}" for k, v in value.items()) or "-"
    return str(value)


@click.command("config")
@json_option
@pass_host
def config_command(host: Host, as_json: bool) -> None:
    """Show the effective configuration and the file it came from."""
    data = host.config.to_builtins()
    if as_json:
        emit_json({"source": str(host.config.source) if host.config.source else None,
                   "settings": data})
        return
    click.echo(f"# {host.config.origin}")
    for section, values in data.items():
        click.echo(f"[{section}]")
        for key, value in values.items():
            click.echo(f"{key} = {json.dumps(value)}")


def run_cli(args: list[str], *, extra_plugins: Sequence[object] = (),
            env: dict[str, str] | None = None) -> int:
    """Load plugins, build the CLI and run it; returns the exit status."""
    env = dict(os.environ if env is None else env)
    # Before plugins load, so a plugin that fails is reported in the CLI's voice;
    # -v/-vv only lower the level once the options are parsed.
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    try:
        plugin_set = load_plugins(BUILTIN_PLUGINS, extra_plugins, load_entrypoints=True, env=env)
        cli = build_cli(plugin_set)
        result = cli.main(args=args, prog_name="hostcore", obj=HostFactory(plugin_set, env),
                          standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ConfigError as exc:
        click.echo(f"hostcore: config error: {exc}", err=True)
        return 2
    except PluginLoadError as exc:
        click.echo(f"hostcore: {exc}", err=True)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    # click returns an --help/--version exit code as an int, a command's value otherwise.
    return result if isinstance(result, int) else 0
