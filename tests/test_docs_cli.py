"""docs/cli.md names every command the CLI offers, built-in or first-party plugin."""

from __future__ import annotations

from pathlib import Path

import click

from hostcore.cli.app import build_cli
from hostcore.plugin.loader import BUILTIN_PLUGINS, load_plugins

CLI_DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _command_paths(group: click.Group, prefix: str = "hostcore") -> list[str]:
    paths = []
    ctx = click.Context(group)
    # get_command, not .commands: the root imports a built-in's commands when looked up.
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix} {name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, path))
    return paths


def test_every_cli_command_is_documented_in_cli_md():
    allow = "hostcore-github-capture,hostcore-file-custody,hostcore-gh"
    plugin_set = load_plugins(BUILTIN_PLUGINS, (), load_entrypoints=True,
                              env={"HOSTCORE_LOAD_PLUGINS": allow})
    paths = _command_paths(build_cli(plugin_set))
    assert "hostcore capture revalidate" in paths  # the plugins' commands were found
    text = CLI_DOC.read_text(encoding="utf-8")
    missing = [path for path in paths if f"`{path}" not in text]
    assert not missing, f"docs/cli.md does not mention: {', '.join(missing)}"


# Every reason ``poll --once`` exits 1 (``PollSummary.failures``), in the words all
# three texts use for it.
POLL_FAILURES = ("failed or was interrupted", "was rate-limited", "a listing raised",
                 "configured provider was unavailable",
                 "a closure or relocation question fails", "ledger could not be written",
                 "signal cut the cycle short")


def test_poll_help_and_both_docs_give_the_same_reasons_for_exit_1():
    from hostcore.workitems.commands import poll_command

    texts = {
        "poll --help": " ".join((poll_command.help or "").split()),
        "docs/cli.md": " ".join(CLI_DOC.read_text(encoding="utf-8").split()),
        "docs/ledger.md": " ".join((CLI_DOC.parent / "ledger.md").read_text(
            encoding="utf-8").split()),
    }
    missing = {name: [reason for reason in POLL_FAILURES if reason not in text]
               for name, text in texts.items()}
    assert not any(missing.values()), missing
