"""The conventions every command follows (ruff and uv are the bar): one meaning for
``-v`` wherever it goes, ``-q``, ``--color`` with ``NO_COLOR``, tables that fit
``COLUMNS``, and a plugin command shadowing another reported by name."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import click

from hostcore import hookimpl
from hostcore.cli.app import run_cli
from hostcore.plugin.terminal import Terminal

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def hostcore(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    full.pop("NO_COLOR", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "hostcore", *args], capture_output=True,
                          text=True, env=full, timeout=300, stdin=subprocess.DEVNULL)


def test_v_before_or_after_plugins_means_the_same(tmp_path):
    root = str(tmp_path / "root")
    before = hostcore("--root", root, "-v", "plugins")
    after = hostcore("--root", root, "plugins", "-v")
    plain = hostcore("--root", root, "plugins")
    assert before.returncode == after.returncode == plain.returncode == 0
    assert before.stdout == after.stdout
    # What -v adds: each plugin's registrations.
    assert "hostcore.evidence.plugin: worker ingest" in before.stdout
    assert "worker ingest" not in plain.stdout


def test_the_plugins_table_fits_columns(tmp_path):
    for columns in ("100", "60"):
        done = hostcore("--root", str(tmp_path / "root"), "plugins", "-v",
                        env={"COLUMNS": columns})
        assert done.returncode == 0, done.stderr
        assert max(len(line) for line in done.stdout.splitlines()) <= int(columns)
    header = done.stdout.splitlines()[0].split()
    assert header == ["NAME", "DISTRIBUTION", "VERSION", "STATUS"]


def test_colour_is_off_on_a_pipe_on_with_always_and_no_color_only_turns_auto_off():
    piped = Terminal(env={})
    assert not piped.colors(sys.stdout) or sys.stdout.isatty()
    assert Terminal(color="always", env={"NO_COLOR": "1"}).colors()
    assert not Terminal(color="never").colors()

    class Tty:
        def isatty(self) -> bool:
            return True

    assert Terminal(env={}).colors(Tty())  # type: ignore[arg-type]
    assert not Terminal(env={"NO_COLOR": "1"}).colors(Tty())  # type: ignore[arg-type]
    assert Terminal(env={"NO_COLOR": ""}).colors(Tty())  # type: ignore[arg-type]


def test_columns_sets_the_width_and_a_nonsense_value_is_ignored():
    assert Terminal(env={"COLUMNS": "80"}).width() == 80
    assert Terminal(env={"COLUMNS": "10"}).width() == 40  # too narrow for any table
    assert Terminal(env={"COLUMNS": "wide"}).width() >= 40


def test_plugins_colours_the_blocked_status_under_color_always_only(tmp_path):
    root = str(tmp_path / "root")
    blocked = {"HOSTCORE_LOAD_PLUGINS": ""}  # every installed plugin is blocked
    always = hostcore("--root", root, "--color", "always", "plugins", env=blocked).stdout
    never = hostcore("--root", root, "--color", "never", "plugins", env=blocked).stdout
    assert re.search(r"\x1b\[33m(\x1b\[22m)?blocked", always)
    assert ANSI.search(never) is None and ANSI.sub("", always) == never
    assert ANSI.search(hostcore("--root", root, "plugins", env=blocked).stdout) is None


def test_quiet_keeps_reports_and_drops_notes(tmp_path):
    root, folder = str(tmp_path / "root"), tmp_path / "project"
    folder.mkdir()
    assert hostcore("--root", root, "-q", "policy", "full", str(folder)).stdout == ""
    shown = hostcore("--root", root, "-q", "policy", "show")
    assert str(folder) in shown.stdout  # a report is what was asked for


class Shadowing:
    """A plugin adding a command under the name the evidence built-in uses."""

    @hookimpl
    def hostcore_commands(self, cli: click.Group) -> None:
        @cli.command("policy")
        def policy() -> None:
            click.echo("the plugin's policy")


def test_a_plugin_command_shadowing_a_built_in_is_refused_and_named(tmp_path, caplog,
                                                                     capsys):
    root = str(tmp_path / "root")
    env = {"HOSTCORE_LOAD_PLUGINS": ""}
    status = run_cli(["--root", root, "policy", "show"], extra_plugins=[Shadowing()], env=env)
    assert status == 0
    out = capsys.readouterr().out
    assert "the plugin's policy" not in out and "fingerprint:" in out
    # Running a built-in's declared command calls no plugin's hook; listing them does.
    with caplog.at_level(logging.WARNING):
        assert run_cli(["--root", root, "--help"], extra_plugins=[Shadowing()], env=env) == 0
    (warning,) = [r.getMessage() for r in caplog.records if "adds a command" in r.getMessage()]
    assert "'policy'" in warning and "refused" in warning and "Shadowing" in warning


def test_help_lists_q_and_color_and_the_one_meaning_of_v():
    done = hostcore("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "-q, --quiet" in text and "--color [auto|always|never]" in text
    assert "-v, --verbose" in text
