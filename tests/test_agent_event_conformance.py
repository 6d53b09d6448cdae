"""AgentEventConformance: a well-behaved agent-event plugin passes it as an author runs it;
one that prints, raises, overstays its budget or is slow on tool events fails, saying so."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

HEADER = """
import time

import pytest

from hostcore import hookimpl
from hostcore.testing import AgentEventConformance


class TestAuthorPlugin(AgentEventConformance):
    @pytest.fixture
    def plugin(self):
        return Plugin()
"""


@pytest.fixture
def run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(body: str):
        pytester.makepyfile(test_author_plugin=HEADER + textwrap.dedent(body))
        return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                            "-p", "hostcore.testing")

    return run


def test_a_plugin_that_counts_stops_passes_every_check(run_kit):
    result = run_kit("""
        class Plugin:
            stops = 0

            @hookimpl
            def hostcore_agent_event(self, event, host):
                if event.name == "Stop":
                    Plugin.stops += 1
    """)
    result.assert_outcomes(passed=6)


def test_a_plugin_declaring_the_events_it_acts_on_passes_every_check(run_kit):
    result = run_kit("""
        from hostcore.agents.events import AgentEvent
        from hostcore.plugin.interest import agent_interest


        class Plugin:
            @hookimpl
            @agent_interest("Stop", "PostToolUse", tools=("Write",))
            def hostcore_agent_event(self, event, host):
                pass

        class TestDeclared(TestAuthorPlugin):
            @pytest.fixture
            def agent_events(self, tmp_path):
                return [AgentEvent(agent="codex", name="Stop", session_id="s", cwd="/w"),
                        AgentEvent(agent="claude-code", name="PostToolUse", session_id="s",
                                   cwd="/w", tool_name="Write")]
    """)
    result.assert_outcomes(passed=12)


def test_a_declaration_leaving_out_an_event_the_plugin_acts_on_fails(run_kit):
    result = run_kit("""
        from hostcore.agents.events import AgentEvent
        from hostcore.plugin.interest import agent_interest


        class Plugin:
            @hookimpl
            @agent_interest("PostToolUse", tools=("Write",))
            def hostcore_agent_event(self, event, host):
                pass

        del TestAuthorPlugin  # only the subclass below, whose events the plugin acts on


        class TestDeclared(AgentEventConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()

            @pytest.fixture
            def agent_events(self, tmp_path):
                return [AgentEvent(agent="claude-code", name="PostToolUse", session_id="s",
                                   cwd="/w", tool_name="Edit")]
    """)
    result.assert_outcomes(passed=5, failed=1)
    assert "leaves it out: the hook would never send it" in " ".join(
        result.stdout.str().split())


@pytest.mark.parametrize(("body", "says"), [
    ("print('hello', event.name)", "printed on stdout for SessionStart"),
    ("raise KeyError(event.name)", "raised for a claude-code SessionStart event"),
    ("time.sleep(event.budget_seconds + 0.4)", "s of budget"),
    ("return 'yes'", "returned ['yes'] for SessionStart"),
])
def test_a_misbehaving_plugin_fails_naming_what_it_did(run_kit, body, says):
    result = run_kit(f"""
        class Plugin:
            @hookimpl
            def hostcore_agent_event(self, event, host):
                {body}
    """)
    assert result.ret != 0
    assert says in " ".join(result.stdout.str().split())


def test_a_plugin_slow_on_every_tool_call_fails(run_kit):
    result = run_kit("""
        class Plugin:
            @hookimpl
            def hostcore_agent_event(self, event, host):
                if event.name.endswith("ToolUse"):
                    time.sleep(0.05)
    """)
    result.assert_outcomes(passed=5, failed=1)
    assert "per tool event on average" in result.stdout.str()


_LEAN_PLUGIN = """
    import sys

    from hostcore.plugin.interest import agent_interest

    def lean(event):
        if event.name == "Stop":
            {body}

    sys.modules["author_lean"] = sys.modules[__name__]


    class Plugin:
        @hookimpl
        @agent_interest("Stop", lean="author_lean:lean")
        def hostcore_agent_event(self, event, host):
            pass
"""


def test_a_plugin_with_a_quiet_lean_handler_passes_every_check(run_kit):
    result = run_kit(_LEAN_PLUGIN.format(body="return None"))
    result.assert_outcomes(passed=6)


@pytest.mark.parametrize(("body", "says"), [
    ("print('hello')", "printed on stdout for Stop"),
    ("raise KeyError(event.name)", "raised for a claude-code Stop"),
    ("return 'yes'", "returned 'yes' for Stop"),
])
def test_a_misbehaving_lean_handler_fails_naming_what_it_did(run_kit, body, says):
    result = run_kit(_LEAN_PLUGIN.format(body=body))
    result.assert_outcomes(passed=5, failed=1)
    assert says in " ".join(result.stdout.str().split())


def test_a_lean_handler_the_hook_cannot_import_fails(run_kit):
    result = run_kit(_LEAN_PLUGIN.format(body="pass").replace(
        'lean="author_lean:lean"', 'lean="author_lean:missing"'))
    result.assert_outcomes(passed=5, failed=1)
    assert "names no function the hook can import" in " ".join(result.stdout.str().split())
