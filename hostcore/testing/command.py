"""The conformance suite for plugin commands (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hostcore.plugin.loader import BUILTIN_PLUGINS, PluginSet, load_plugins
from hostcore.testing.kit import _PluginSuite, contract_failure, plugin_label, require

if TYPE_CHECKING:
    import click

# Exit status of a click usage error (an unknown option, a missing argument).
USAGE_ERROR = 2


class CommandRun:
    """One ``hostcore`` run: exit status and what it printed."""

    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr

    def described(self, args: Sequence[str]) -> str:
        return (f"`hostcore {' '.join(args)}` exited {self.exit_code}\n"
                f"stdout:\n{self.stdout.rstrip() or '(nothing)'}\n"
                f"stderr:\n{self.stderr.rstrip() or '(nothing)'}")


class CommandConformance(_PluginSuite):
    """Checks every command the plugin's ``hostcore_commands`` adds.

    Contract: the hook adds at least one click command, each with help text and
    under a name no hostcore command or built-in takes (the host would refuse
    it); it raises nothing, prints nothing, and adds the same commands to every
    command line it is given (nothing carried from one to the next). ``hostcore
    NAME --help`` (and each subcommand's) works without a host: it creates
    nothing under the root and works with a config file that does not parse. An
    unknown option is a usage error (exit 2), not a traceback. The plugin's
    commands load in strict mode. Each argument list of ``command_invocations``
    exits 0 against a fresh root, and prints one JSON document when it asks for
    ``--json``.
    """

    @pytest.fixture
    def command_invocations(self) -> Sequence[Sequence[str]]:
        """Argument lists, command name first, that must exit 0 against a fresh root
        (e.g. ``[["notes"], ["notes", "--json"]]``)."""
        return ()

    @pytest.fixture
    def hostcore_run(self, plugin: object, plugin_config: Mapping[str, Any], tmp_path: Path,
                     host_env: Mapping[str, str] | None) -> Callable[..., CommandRun]:
        """Run ``hostcore`` in-process with the plugin, as installed plugins are run."""
        own = () if _is_builtin(plugin) else (plugin,)
        config = tmp_path / "conformance.toml"
        config.write_text(_toml(plugin_config), encoding="utf-8")

        def run(*args: str, root: Path | None = None, config_file: Path | None = None,
                env: Mapping[str, str] | None = None) -> CommandRun:
            # The CLI application loads with the first run, not with hostcore's pytest plugin.
            from hostcore.cli.app import run_cli

            full_env = {"HOSTCORE_LOAD_PLUGINS": "", **(host_env or {}), **(env or {})}
            argv = ["--root", str(root or tmp_path / "cli-root"),
                    "--config", str(config_file or config), *args]
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = run_cli(argv, extra_plugins=own, env=full_env)
            return CommandRun(code, out.getvalue(), err.getvalue())

        return run

    @pytest.fixture
    def commands(self, plugin: object) -> dict[str, click.Command]:
        """The commands the plugin's hook adds, by name (at least one)."""
        added, printed = _added_commands(plugin)
        require(added, f"plugin {plugin_label(plugin)!r} added no command: its "
                       "hostcore_commands hookimpl is missing or adds nothing (use "
                       "`@cli.command()` or `cli.add_command(...)` on the group it is given)")
        require(not printed, f"plugin {plugin_label(plugin)!r}: hostcore_commands printed "
                             f"{printed!r}; it runs while hostcore's command line is built, "
                             "and anything it prints the host sends to stderr")
        return added

    def test_commands_have_help_and_names_of_their_own(
            self, plugin: object, commands: dict[str, click.Command]) -> None:
        taken = _hostcore_command_names(plugin)
        clashes = sorted(set(commands) & taken)
        require(not clashes, f"plugin {plugin_label(plugin)!r} adds command(s) {clashes}, "
                             "which hostcore itself adds: the host refuses a plugin's command "
                             "under a taken name (with a warning), so yours would never run. "
                             "Choose another name.")
        import click  # with the suite: hostcore's pytest plugin loads in every pytest run

        for path, command in _walk(commands):
            require(isinstance(command, click.Command),
                    f"`hostcore {path}` is {type(command).__name__}, not a click command")
            require((command.help or command.short_help or "").strip(),
                    f"`hostcore {path}` has no help: give it a docstring, which "
                    "`hostcore --help` lists it with")

    def test_the_hook_adds_the_same_commands_to_every_command_line(
            self, plugin: object, commands: dict[str, click.Command]) -> None:
        again, _ = _added_commands(plugin)
        require(sorted(again) == sorted(commands),
                f"plugin {plugin_label(plugin)!r}: a second command line got commands "
                f"{sorted(again)} where the first got {sorted(commands)}; each host builds "
                "its own, so the hook must add its commands every time it is called")

    def test_help_needs_no_host(self, hostcore_run: Callable[..., CommandRun],
                                commands: dict[str, click.Command], tmp_path: Path) -> None:
        root = tmp_path / "never-created"
        broken = tmp_path / "broken.toml"
        broken.write_text("this is [not toml\n", encoding="utf-8")
        for path, _ in _walk(commands):
            args = [*path.split(), "--help"]
            result = hostcore_run(*args, root=root, config_file=broken)
            require(result.exit_code == 0 and f"Usage: hostcore {path}" in result.stdout,
                    "help must work before any host is built (a bad config, an unusable "
                    "root): take the host through `pass_host`, never at import or in the "
                    "hook.\n" + result.described(args))
        require(not root.exists(), f"`--help` created the state root {root}: a command must "
                                   "build its host only when it runs (`pass_host`)")

    def test_an_unknown_option_is_a_usage_error(
            self, hostcore_run: Callable[..., CommandRun],
            commands: dict[str, click.Command]) -> None:
        for name in commands:
            args = [name, "--no-such-option-for-conformance"]
            result = hostcore_run(*args)
            require(result.exit_code == USAGE_ERROR and "Traceback" not in result.stderr,
                    "an unknown option must be a usage error (exit 2, one line), as click "
                    "reports it.\n" + result.described(args))

    def test_the_commands_load_in_strict_mode(self, hostcore_run: Callable[..., CommandRun],
                                              commands: dict[str, click.Command]) -> None:
        result = hostcore_run("--help", env={"HOSTCORE_STRICT_PLUGINS": "1"})
        require(result.exit_code == 0, "with HOSTCORE_STRICT_PLUGINS=1 the plugin must load "
                                       "cleanly.\n" + result.described(["--help"]))
        listed = {line.split()[0] for line in result.stdout.splitlines()
                  if line.startswith("  ") and line.split()}
        missing = sorted(set(commands) - listed)
        require(not missing, f"`hostcore --help` does not list {missing}: the host refused "
                             f"or dropped them.\n{result.described(['--help'])}")

    def test_each_invocation_exits_0(self, hostcore_run: Callable[..., CommandRun],
                                     command_invocations: Sequence[Sequence[str]],
                                     commands: dict[str, click.Command]) -> None:
        for args in command_invocations:
            require(args and args[0] in commands,
                    f"command_invocations: {list(args)} does not start with one of the "
                    f"plugin's commands {sorted(commands)}")
            result = hostcore_run(*args)
            require(result.exit_code == 0, result.described(args))
            if "--json" in args:
                try:
                    json.loads(result.stdout)
                except ValueError as exc:
                    contract_failure("with --json a command prints one JSON document and "
                                     "nothing else on stdout (what else it says goes to "
                                     "stderr).\n" + result.described(args), raised=exc)


def _is_builtin(plugin: object) -> bool:
    return getattr(plugin, "__name__", None) in BUILTIN_PLUGINS


def _load(plugin: object | None) -> PluginSet:
    """A plugin set of ``plugin`` alone (``None``: of the built-ins but it)."""
    if plugin is None:
        return load_plugins(BUILTIN_PLUGINS, (), load_entrypoints=False, env={})
    if _is_builtin(plugin):
        return load_plugins((str(getattr(plugin, "__name__")),), (),  # noqa: B009
                            load_entrypoints=False, env={})
    return load_plugins((), (plugin,), load_entrypoints=False, env={})


def _added_commands(plugin: object) -> tuple[dict[str, click.Command], str]:
    """The commands the plugin's hook adds to a fresh group, and what it printed."""
    import click

    plugins = _load(plugin)
    failed = [i for i in plugins.infos.values() if i.status == "failed"]
    if failed:
        contract_failure(f"plugin {plugin_label(plugin)!r} failed to load, so the host would "
                         f"skip it: {failed[0].error}\n{failed[0].traceback or ''}".rstrip())
    group = click.Group("hostcore")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            plugins.pm.hook.hostcore_commands(cli=group)
    except Exception as exc:
        contract_failure(f"plugin {plugin_label(plugin)!r}: hostcore_commands raised; the "
                         "host would report the plugin failed and drop its commands.",
                         raised=exc)
    return dict(group.commands), printed.getvalue()


def _hostcore_command_names(plugin: object) -> set[str]:
    """The names hostcore's own commands and the other built-ins' take."""
    # The host's own four are in the CLI application, loaded only when a suite runs.
    import click

    from hostcore.cli.commands import COMMANDS

    plugins = _load(None)
    if _is_builtin(plugin):
        plugins.pm.unregister(name=str(getattr(plugin, "__name__")))  # noqa: B009
    group = click.Group("hostcore")
    plugins.pm.hook.hostcore_commands(cli=group)
    return {str(c.name) for c in COMMANDS} | set(group.commands)


def _walk(commands: Mapping[str, click.Command], prefix: str = ""
          ) -> Iterator[tuple[str, click.Command]]:
    """``("name sub", command)`` for every command and, under a group, its subcommands."""
    for name, command in sorted(commands.items()):
        path = f"{prefix}{name}"
        yield path, command
        subcommands = getattr(command, "commands", None)  # a click.Group's
        if isinstance(subcommands, Mapping):
            yield from _walk(subcommands, f"{path} ")


def _toml(config: Mapping[str, Any]) -> str:
    """``config`` (tables of strings, numbers, booleans and lists of them) as TOML."""
    lines: list[str] = []

    def table(prefix: str, values: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        if prefix and (scalars or not values):
            lines.append(f"[{prefix}]")
        for key, value in scalars.items():
            lines.append(f"{json.dumps(key)} = {_value(value)}")
        for key, value in values.items():
            if isinstance(value, Mapping):
                table(f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key), value)

    table("", config)
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    # JSON's strings, numbers and arrays are TOML's too; booleans are spelt alike.
    if isinstance(value, (str, bool, int, float)) or (
            isinstance(value, list) and all(isinstance(v, (str, bool, int, float))
                                            for v in value)):
        return json.dumps(value)
    contract_failure(f"plugin_config: {value!r} is not a string, number, boolean or list of "
                     "them; CommandConformance writes the config as a TOML file")
