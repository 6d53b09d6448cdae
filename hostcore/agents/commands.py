"""The ``hook`` and ``hooks`` commands.

``hostcore hook`` is what an agent runs; it normally never gets here (the lean
path, :mod:`hostcore.cli.hook`, takes it first) and only ``hook --help`` or an
unusual argument order does: it then does the same. ``hostcore hooks install``,
``uninstall`` and ``status`` edit and read each agent's settings
(:mod:`hostcore.agents.install`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from hostcore.agents import install
from hostcore.agents.events import AGENTS, Agent
from hostcore.agents.hook import handle_stdin, rebuild_index
from hostcore.host import Host, prepare_root, resolve_root
from hostcore.plugin.cli import HostFactory, emit_json, json_option, pass_host
from hostcore.plugin.loader import PluginSet

_agent_choice = click.Choice(AGENTS)
_scope_option = click.option(
    "--scope", type=click.Choice(("user", "project")), default="user", show_default=True,
    help="user: the agent's settings for every folder; project: this folder's.")
_dry_run_option = click.option(
    "--dry-run", is_flag=True,
    help="Print the settings file as it would be written; change nothing.")


@click.command("hook")
@click.option("--agent", type=_agent_choice, required=True,
              help="The agent whose event is on stdin.")
@click.pass_context
def hook_command(ctx: click.Context, agent: Agent) -> None:
    """Handle one agent hook event, read as JSON on stdin (agents run this).

    Prints nothing on stdout and exits 0, or 2 when a gate asks the agent to
    keep working (its message on stderr): a fault (input that is no event, a
    plugin that raised, a root that cannot be used) is logged on stderr and
    counted under the root, where `hostcore status` shows it.
    """
    started = time.monotonic()
    factory = ctx.find_object(HostFactory)
    if factory is None:
        raise click.UsageError("this command must run under the hostcore CLI")
    env = factory.env
    chosen_root, config = factory.root, factory.config

    def make_host(root: Path, plugins: PluginSet) -> Host:
        return Host(root=root, config=config, env=env, plugin_set=plugins)

    outcome = handle_stdin(sys.stdin.buffer, agent=agent, env=env, make_host=make_host,
                           root_for=lambda: prepare_root(resolve_root(chosen_root, env),
                                                         read_only=False),
                           started=started)
    ctx.exit(outcome.answer(sys.stderr))


@click.group("hooks")
def hooks_group() -> None:
    """Install, remove and check hostcore's hooks in Claude Code's and Codex's settings."""


def _program() -> list[str]:
    """How an agent starts this hostcore: the console script beside this interpreter,
    else the interpreter running the module. Absolute: an agent's PATH is its own."""
    script = Path(sys.executable).parent / "hostcore"
    if script.is_file() and os.access(script, os.X_OK):
        return [os.path.abspath(script)]
    return [os.path.abspath(sys.executable), "-m", "hostcore"]


def _path(host: Host, agent: Agent, scope: str) -> Path:
    return install.settings_path(agent, cast(install.Scope, scope), env=host.env,
                                 project=Path.cwd())


def _settings_command(name: str, *, agent_help: str
                      ) -> Callable[[Callable[..., None]], click.Command]:
    """``hooks <name>``, a command editing one agent's settings: --agent, --scope and
    --dry-run, its host opened read-only."""

    def decorate(function: Callable[..., None]) -> click.Command:
        options = _scope_option(_dry_run_option(pass_host(read_only=True)(function)))
        chosen = click.option("--agent", type=_agent_choice, required=True,
                              help=agent_help)(options)
        return hooks_group.command(name)(chosen)

    return decorate


def _written(path: Path, settings: dict[str, Any], dry_run: bool) -> bool:
    """Write ``settings`` to ``path``, or on --dry-run print them and leave it; whether
    they were written."""
    if dry_run:
        click.echo(install.render(settings).decode(), nl=False)
        click.echo(f"hostcore: dry run: {path} was not changed", err=True)
        return False
    install.write_settings(path, settings)
    return True


@_settings_command("install", agent_help="The agent to hook.")
def install_command(host: Host, agent: Agent, scope: str, dry_run: bool) -> None:
    """Add hostcore's hook to each event of the agent's settings.

    One entry per event (SessionStart, UserPromptSubmit, PreToolUse,
    PostToolUse, Stop, SessionEnd), each with a timeout, running this hostcore
    with this --root. Installing again replaces hostcore's entries; every other
    setting and hook is kept. A settings file that does not parse is refused
    (exit 1), naming it.
    """
    path = _path(host, agent, scope)
    command = install.command_line(_program(), host.root, agent)
    settings = install.with_ours(install.read_settings(path), agent, command)
    if not _written(path, settings, dry_run):
        return
    # The hook's plugin index, made now: the first hook then loads only what it needs.
    rebuild_index(prepare_root(host.root, read_only=False), host.env)
    click.echo(f"{agent}: hostcore hooks {len(install.TIMEOUTS)} events in {path}")


@_settings_command("uninstall", agent_help="The agent to unhook.")
def uninstall_command(host: Host, agent: Agent, scope: str, dry_run: bool) -> None:
    """Take hostcore's hooks out of the agent's settings; everything else stays."""
    path = _path(host, agent, scope)
    found = install.read_settings(path)
    if not install.entries(found, agent):
        click.echo(f"{agent}: no hostcore hook in {path}")
        return
    if _written(path, install.without_ours(found, agent), dry_run):
        click.echo(f"{agent}: hostcore hooks removed from {path}")


@hooks_group.command("status")
@click.option("--agent", type=_agent_choice, help="One agent (default: both).")
@_scope_option
@json_option
@pass_host(read_only=True)
def status_command(host: Host, agent: Agent | None, scope: str, as_json: bool) -> None:
    """Show, per agent, which events run hostcore's hook and whether each entry runs
    this hostcore with this root.

    Keys of --json: agent, scope, path, installed, missing, current, error.
    """
    reports: list[dict[str, Any]] = []
    for name in (agent,) if agent else AGENTS:
        path = _path(host, name, scope)
        report: dict[str, Any] = {"agent": name, "scope": scope, "path": str(path),
                                  "installed": [], "missing": list(install.TIMEOUTS),
                                  "current": False, "error": None}
        try:
            found = install.entries(install.read_settings(path), name)
        except install.SettingsRefused as exc:
            report["error"] = str(exc)
        else:
            events = [e.event for e in found]
            expected = install.command_line(_program(), host.root, name)
            report["installed"] = sorted(set(events))
            report["missing"] = [e for e in install.TIMEOUTS if e not in events]
            report["current"] = bool(found) and not report["missing"] and all(
                e.command == expected for e in found) and len(found) == len(install.TIMEOUTS)
        reports.append(report)
    if as_json:
        emit_json(reports)
        return
    for report in reports:
        if report["error"]:
            click.echo(f"{report['agent']}: {report['error']}")
        elif not report["installed"]:
            click.echo(f"{report['agent']}: not installed ({report['path']})")
        else:
            state = "up to date" if report["current"] else (
                "stale: run `hostcore hooks install` again")
            missing = f", missing {', '.join(report['missing'])}" if report["missing"] else ""
            click.echo(f"{report['agent']}: {len(report['installed'])} events in "
                       f"{report['path']}{missing} ({state})")
