"""CommandConformance: good command plugins (the built-ins' among them) pass it; broken
ones fail it with a message naming the command, the contract and the fix."""

from __future__ import annotations

import textwrap

import pytest

import hostcore.evidence.plugin
import hostcore.scaffold.plugin
from hostcore.testing import CommandConformance

pytest_plugins = ["pytester"]


class TestTheEvidenceCommandsConform(CommandConformance):
    @pytest.fixture
    def plugin(self):
        return hostcore.evidence.plugin

    @pytest.fixture
    def command_invocations(self):
        return [["evidence"], ["evidence", "--json"], ["policy", "show", "--json"]]


class TestNewPluginConforms(CommandConformance):
    @pytest.fixture
    def plugin(self):
        return hostcore.scaffold.plugin


HEADER = """
import json
import click
import pytest
from hostcore import hookimpl
from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore.testing import CommandConformance

"""

GOOD = """
@click.command("notes")
@json_option
@pass_host(read_only=True)
def notes(host, as_json):
    \"\"\"Show how many notes there are.\"\"\"
    emit_json({"notes": 0}) if as_json else click.echo("0 notes")

@click.group("board")
def board():
    \"\"\"The notes board.\"\"\"

@board.command("show")
def show():
    \"\"\"Show the board.\"\"\"
    click.echo("empty board")

class Plugin:
    @hookimpl
    def hostcore_commands(self, cli):
        cli.add_command(notes)
        cli.add_command(board)
"""


@pytest.fixture
def run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run an author's test module (the bodies, after HEADER) in an inner pytest."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(*bodies: str):
        source = HEADER + "".join(textwrap.dedent(body) for body in bodies)
        pytester.makepyfile(test_author_plugin=source)
        return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                            "-p", "hostcore.testing")

    return run


def says(result, *fragments: str) -> None:
    """Every fragment appears in the inner run's report, in order."""
    text = " ".join(result.stdout.str().split())
    at = 0
    for fragment in fragments:
        found = text.find(fragment, at)
        assert found >= 0, f"{fragment!r} not in the report:\n{result.stdout.str()}"
        at = found + len(fragment)


SUITE = """
class TestNotes(CommandConformance):
    @pytest.fixture
    def plugin(self):
        return Plugin()

    @pytest.fixture
    def command_invocations(self):
        return INVOCATIONS
"""


def test_a_good_command_plugin_and_its_group_pass_every_check(run_kit):
    result = run_kit(GOOD, "INVOCATIONS = [['notes'], ['notes', '--json'], ['board', "
                           "'show']]\n", SUITE)
    result.assert_outcomes(passed=6)


def test_a_raising_hook_fails_naming_the_plugin_with_its_traceback(run_kit):
    result = run_kit("""
        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                raise RuntimeError("no commands today")

        INVOCATIONS = []
    """, SUITE)
    result.assert_outcomes(errors=6)
    says(result, "plugin 'Plugin': hostcore_commands raised; the host would report the "
                 "plugin failed and drop its commands", "RuntimeError: no commands today")


def test_a_command_under_a_built_in_name_is_told_it_would_be_refused(run_kit):
    result = run_kit("""
        @click.command("export")
        def export():
            \"\"\"Export my way.\"\"\"

        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                cli.add_command(export)

        INVOCATIONS = []
    """, SUITE)
    # Refused by the host too: strict mode's --help does not list the plugin's export as
    # its own, but the built-in's is there, so only the name check fails.
    result.assert_outcomes(passed=5, failed=1)
    says(result, "adds command(s) ['export'], which hostcore itself adds",
         "so yours would never run")


def test_a_command_without_help_and_a_hook_that_prints_are_named(run_kit):
    result = run_kit("""
        @click.command("bare")
        def bare():
            pass

        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                print("adding bare")
                cli.add_command(bare)

        INVOCATIONS = []
    """, SUITE)
    result.assert_outcomes(errors=6)
    says(result, "hostcore_commands printed 'adding bare\\n'")


def test_a_command_without_help_is_told_to_take_a_docstring(run_kit):
    result = run_kit("""
        @click.command("bare")
        def bare():
            pass

        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                cli.add_command(bare)

        INVOCATIONS = []
    """, SUITE)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "`hostcore bare` has no help: give it a docstring")


def test_json_output_mixed_with_text_fails_naming_the_invocation(run_kit):
    result = run_kit("""
        @click.command("noisy")
        @json_option
        def noisy(as_json):
            \"\"\"Print JSON after a chatty line.\"\"\"
            click.echo("working...")
            emit_json({"ok": True})

        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                cli.add_command(noisy)

        INVOCATIONS = [["noisy", "--json"]]
    """, SUITE)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "with --json a command prints one JSON document and nothing else on stdout",
         "`hostcore noisy --json` exited 0", "working...")


def test_a_failing_invocation_shows_its_exit_status_and_output(run_kit):
    result = run_kit(GOOD, "INVOCATIONS = [['notes', 'extra-argument']]\n", SUITE)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "`hostcore notes extra-argument` exited 2", "unexpected extra argument")


def test_a_hook_that_keeps_state_between_command_lines_fails_the_repeat_check(run_kit):
    result = run_kit("""
        class Plugin:
            calls = 0

            @hookimpl
            def hostcore_commands(self, cli):
                Plugin.calls += 1

                @cli.command(f"take-{Plugin.calls}")
                def take():
                    \"\"\"A name that changes with every command line.\"\"\"

        INVOCATIONS = []
    """, SUITE)
    # The help and option checks run against other command lines, so they miss it too.
    result.assert_outcomes(passed=3, failed=3)
    says(result, "a second command line got commands ['take-3'] where the first got "
                 "['take-2']", "the hook must add its commands every time it is called")


def test_a_plugin_adding_no_command_is_told_how_to_add_one(run_kit):
    result = run_kit("""
        class Plugin:
            @hookimpl
            def hostcore_commands(self, cli):
                return None

        INVOCATIONS = []
    """, SUITE)
    result.assert_outcomes(errors=6)
    says(result, "plugin 'Plugin' added no command", "`@cli.command()`")
