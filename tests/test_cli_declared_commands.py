"""The built-ins declare their commands: `--help` lists them and only running one
imports its module (checked in fresh interpreters, through ``sys.modules``)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys

import click
import pytest

from hostcore.plugin.loader import BUILTIN_PLUGINS

DOMAINS = ("evidence", "export", "workitems", "scaffold", "governance", "agents")
# Every built-in domain's command modules (usage has one of its own).
COMMAND_MODULES = {*(f"hostcore.{d}.commands" for d in DOMAINS),
                   "hostcore.evidence.usage_command"}
DECLARING = [m for m in BUILTIN_PLUGINS
             if hasattr(importlib.import_module(m), "DECLARED_COMMANDS")]


def run_main(args: list[str], root: str) -> tuple[str, set[str]]:
    """What ``hostcore ARGS`` prints, and the modules loaded once it ran."""
    script = (
        "import sys\n"
        "from hostcore.__main__ import main\n"
        f"try:\n    main({['--root', root, *args]!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, env=env)
    printed, _, modules_line = out.stdout.rstrip("\n").rpartition("\n")
    return printed, set(ast.literal_eval(modules_line))


def test_the_built_in_domains_declare_their_commands():
    # agents' `hook` and `hooks` still come from its hook alone (its module is not this
    # change's); the other domains' commands are all declared.
    assert {m for m in BUILTIN_PLUGINS if m.split(".")[1] in DOMAINS[:-1]} <= set(DECLARING)


@pytest.mark.parametrize("module_name", DECLARING)
def test_a_declaration_names_what_the_hook_adds_with_the_command_s_own_help(module_name):
    module = importlib.import_module(module_name)
    group = click.Group("plain")
    module.hostcore_commands(cli=group)
    declared = module.DECLARED_COMMANDS
    assert sorted(declared) == sorted(group.commands)
    for name, (target, help_text) in declared.items():
        where, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(where), attribute)
        assert command is group.commands[name]
        assert help_text == command.get_short_help_str(10_000), name


def test_a_cold_status_imports_no_domain_s_command_module(tmp_path):
    printed, loaded = run_main(["status", "--json"], str(tmp_path / "root"))
    assert json.loads(printed)["components"]  # the report itself, complete
    assert sorted(loaded & COMMAND_MODULES) == []


def test_help_lists_every_command_with_its_one_line_help_and_imports_no_declared_one(
        tmp_path):
    printed, loaded = run_main(["--help"], str(tmp_path / "root"))
    listed = {}
    for line in printed.split("Commands:\n", 1)[1].splitlines():
        name, _, help_text = line.strip().partition(" ")
        listed[name] = help_text.strip()
    for module_name in DECLARING:
        for name, (_, help_text) in importlib.import_module(
                module_name).DECLARED_COMMANDS.items():
            # Shortened to the terminal as click does: the start is the declared help.
            shown = listed[name].removesuffix("...")
            assert shown and help_text.startswith(shown), (name, listed[name])
    # The host's own, agents' (added by its hook) and a plugin's are listed too.
    assert {"plugins", "run", "status", "config", "hook", "hooks", "capture"} <= set(listed)
    declared_modules = {f"hostcore.{d}.commands" for d in DOMAINS[:-1]}
    assert sorted(loaded & (declared_modules | {"hostcore.evidence.usage_command"})) == []


def test_running_a_declared_command_imports_its_module_alone(tmp_path):
    printed, loaded = run_main(["poll", "--help"], str(tmp_path / "root"))
    assert "Usage: hostcore poll" in printed
    assert sorted(loaded & COMMAND_MODULES) == ["hostcore.workitems.commands"]
