"""The ``hostcore`` command line: a thin face over :class:`~hostcore.host.Host`.

Exit status: 0 success; 1 a step, a lock wait, the store or disk, or a strict
plugin load failed; 2 bad usage or configuration. Every error is one line on
stderr naming what failed (``-vv`` adds the traceback; a strict plugin load's
comes always, since strict mode is for the plugin's author). Every command that
lists or reports takes ``--json``; its keys are stable and documented in
``docs/cli.md``.
"""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import click

from hostcore import __version__
from hostcore.cli.argv import LOG_FORMAT
from hostcore.cli.commands import COMMANDS
from hostcore.cli.failures import exit_status
from hostcore.errors import HostcoreError
from hostcore.plugin.calls import callers, guarded
from hostcore.plugin.cli import HostFactory
from hostcore.plugin.declared import load_declared
from hostcore.plugin.loader import BUILTIN_PLUGINS, PluginSet, load_plugins
from hostcore.plugin.terminal import COLOR_CHOICES, ColorChoice, Terminal, configure
from hostcore.steps import StdoutGuard

log = logging.getLogger("hostcore.cli")

# Who adds the host's own commands, as RootGroup names owners.
HOST = "hostcore"


class Declared(NamedTuple):
    """A built-in's command as its plugin module declares it (``DECLARED_COMMANDS``)."""

    owner: str  # the built-in plugin's name
    target: str  # "module:attribute" of the click command
    help: str  # its one-line help, as `hostcore --help` lists it


class RootGroup(click.Group):
    """The root group: the host's own commands at once, the rest when first needed.

    A built-in plugin module declares its commands (``DECLARED_COMMANDS``: name ->
    ``("module:attribute", one-line help)``): `hostcore --help` lists them from
    there, and a command's module is imported only when that command is looked up
    to run (or to show its own help), so ``hostcore poll`` imports neither what
    ``export`` nor what ``check`` needs. Its ``hostcore_commands`` hook is for
    other groups (an embedder's, the conformance kit's) and is not called here.

    Commands added through the ``hostcore_commands`` hook (a built-in that declares
    nothing, every installed plugin) are attached the first time a name neither
    the host's own nor declared is looked up, or the list is asked for
    (``--help``): running ``status`` or ``run --once`` never imports what
    ``capture`` or ``custody`` need, which would cost every cold start.

    Each plugin's hook is called on its own, built-ins first: one that raises is
    reported and failed, and the commands it added before raising are taken back,
    while every other plugin's commands work. A plugin adding a command under a
    name that is already taken (a built-in's, declared or added, or an earlier
    plugin's) has that command refused, with a warning naming both; its other
    commands stay.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plugin_set: PluginSet | None = None
        # Who added each command (HOST for the host's own), who is adding now, and
        # whose hostcore_commands has been called.
        self._owners: dict[str, str] = {}
        self._adding = HOST
        self._called: set[str] = set()
        self._builtins: set[str] = {HOST}
        # The built-ins' declared commands whose module is not imported yet.
        self._declared: dict[str, Declared] = {}

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        declared = self._declared.get(name) if name is not None else None
        if name is not None and (name in self.commands or declared is not None):
            holder = declared.owner if declared is not None else self._owners.get(name, HOST)
            if self._adding not in self._builtins or holder in self._builtins:
                who = "hostcore itself" if holder in self._builtins else f"plugin {holder!r}"
                log.warning("plugin %r adds a command %r, which %s already adds; the "
                            "plugin's is refused", self._adding, name, who)
                return
            # A plugin took a built-in's name while `plugins` called the plugins' hooks
            # ahead of the built-ins': the built-in takes it back.
            log.warning("plugin %r adds a command %r, which hostcore itself adds; the "
                        "plugin's is refused", holder, name)
        super().add_command(cmd, name)
        if name is not None:
            self._owners[name] = self._adding

    def attach(self, plugin_set: PluginSet) -> None:
        """Take the built-ins' declared commands, and call ``plugin_set``'s
        ``hostcore_commands`` hooks when commands are needed."""
        self.plugin_set = plugin_set
        builtins = [n for n, i in plugin_set.infos.items() if i.status == "builtin"]
        self._builtins.update(builtins)
        for plugin_name in builtins:
            declared = getattr(plugin_set.plugin_object(plugin_name), "DECLARED_COMMANDS",
                               None)
            if declared is None:
                continue
            self._called.add(plugin_name)  # its hook would import what the declaration spares
            for name, (target, help_text) in declared.items():
                self._declared[name] = Declared(plugin_name, target, help_text)

    def _load_declared(self, name: str) -> None:
        """Import declared command ``name``'s module and add the command itself."""
        declared = self._declared.pop(name)
        command = load_declared(declared.target)
        self._adding = declared.owner
        try:
            self.add_command(command, name)
        finally:
            self._adding = HOST

    def _attach_plugin_commands(self, *, builtins: bool = True) -> None:
        plugin_set = self.plugin_set
        if plugin_set is None:
            return
        for plugin_name, call in callers(plugin_set, "hostcore_commands",
                                         order="registration"):
            if plugin_name in self._called or (not builtins and plugin_name in self._builtins):
                continue
            self._called.add(plugin_name)
            before = dict(self.commands)
            self._adding = plugin_name
            try:
                ok, _ = guarded(plugin_set, plugin_name, "hostcore_commands", call, cli=self)
            finally:
                self._adding = HOST
            if not ok:
                # Half a plugin's commands is worse than none: take back what it added.
                self.commands = before
                self._owners = {n: o for n, o in self._owners.items() if n in before}
        if builtins:
            self.plugin_set = None

    def check_plugin_commands(self) -> None:
        """Call every loaded plugin's ``hostcore_commands``, so ``hostcore plugins``
        reports one that raises. The built-ins' wait until they are needed: theirs
        are hostcore's own, and their command modules would cost the listing."""
        self._attach_plugin_commands(builtins=False)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._declared:
            self._load_declared(cmd_name)
        elif cmd_name not in self.commands:
            self._attach_plugin_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._attach_plugin_commands()
        return sorted({*self.commands, *self._declared})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, but a declared command is shortened from its declared help:
        `hostcore --help` imports no built-in's command module."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            declared = self._declared.get(name)
            command = (click.Command(name, help=declared.help) if declared is not None
                       else self.get_command(ctx, name))
            if command is not None and not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit))
                                    for name, command in rows])


def _root_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    # click would turn "" into Path("."): a script whose variable came out empty would
    # keep its state in whatever folder it ran from.
    if value is not None and not value.strip():
        raise click.BadParameter("is empty; give a folder, or leave it out to use the "
                                 "default root", ctx=ctx, param=param)
    return None if value is None else Path(value)


def build_cli(plugin_set: PluginSet) -> click.Group:
    """The root command group, with built-in and plugin subcommands attached."""

    @click.group(cls=RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="hostcore", message="%(prog)s %(version)s")
    @click.option("--root", type=click.Path(path_type=str),
                  envvar="HOSTCORE_ROOT", show_envvar=True, callback=_root_option,
                  help="State root folder (default: the platform's user data dir).")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                  help="TOML config file (default: <root>/hostcore.toml if present).")
    @click.option("-v", "--verbose", count=True,
                  help="More output: INFO logs and each listing's details (-vv: DEBUG and "
                       "tracebacks). The same after `plugins` or `status`.")
    @click.option("-q", "--quiet", is_flag=True,
                  help="Only errors, and what a command reports (tables, JSON).")
    @click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto",
                  show_default=True,
                  help="Colour failed and unavailable states (auto: on a terminal, "
                       "unless NO_COLOR is set).")
    @click.pass_context
    def cli(ctx: click.Context, root: Path | None, config_path: Path | None,
            verbose: int, quiet: bool, color: ColorChoice) -> None:
        """hostcore: a small plugin host for the local side of coding-agent infrastructure.

        It ingests evidence from sources, keeps it in an embedded store under one
        state root, polls work-item providers and runs plugin workers on a tick.
        Start with `hostcore run --once`, then `hostcore status`.
        """
        factory = ctx.ensure_object(HostFactory)
        terminal = Terminal(quiet=quiet, verbose=verbose, color=color, env=factory.env)
        terminal.apply_log_level()
        configure(ctx, terminal)
        factory.root, factory.config = root, config_path
        ctx.call_on_close(factory.close)

    for command in COMMANDS:
        cli.add_command(command)
    assert isinstance(cli, RootGroup)
    cli.attach(plugin_set)
    return cli


def run_cli(args: list[str], *, extra_plugins: Sequence[object] = (),
            env: Mapping[str, str] | None = None, freeze_loaded: bool = False) -> int:
    """Load plugins, build the CLI and run it; returns the exit status.

    ``freeze_loaded`` (the console script, which turned the cyclic collector off
    before importing this module): once the plugins are loaded and the command line
    is built, move every object made so far out of the collector's reach and turn
    it back on. Those objects (modules, classes, functions, the plugins) live as
    long as the process; each pass of the collector, and the full one at exit,
    would scan them all again for nothing: about a sixth of a cold ``status``.
    What the command itself makes is collected as usual.
    """
    env = dict(os.environ if env is None else env)
    # Before plugins load, so a plugin that fails is reported in the CLI's voice;
    # -v/-vv only lower the level once the options are parsed.
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    try:
        # What a plugin prints as it is imported goes to stderr: stdout is the command's.
        with StdoutGuard():
            plugin_set = load_plugins(BUILTIN_PLUGINS, extra_plugins, load_entrypoints=True,
                                      env=env)
            cli = build_cli(plugin_set)
        if freeze_loaded:
            gc.freeze()
            gc.enable()
        result = cli.main(args=args, prog_name="hostcore", obj=HostFactory(plugin_set, env),
                          standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (HostcoreError, sqlite3.DatabaseError, OSError, SystemExit) as exc:
        # ConfigError and PluginLoadError are HostcoreErrors too.
        status = exit_status(exc, click.echo)
        assert status is not None  # every one of these has a status
        return status
    # click returns an --help/--version exit code as an int, a command's value otherwise.
    return result if isinstance(result, int) else 0

