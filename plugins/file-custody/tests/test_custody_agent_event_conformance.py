"""The file custody plugin's ``hostcore_agent_event`` against hostcore's conformance kit:
every event of both agents taken quietly within its budget, tool events cheap, each
event sent twice (a retried hook); the sessions it starts are the agent's (here, the
nearest ancestor of the test process that is not a shell)."""

from __future__ import annotations

import hostcore_file_custody.plugin as custody_plugin
import msgspec
import pytest
from hostcore_file_custody import HeartbeatRegistry, find_agent, list_sessions
from hostcore_file_custody.agent_hook import handle_lean_event

from hostcore.plugin.lean import LeanEvent
from hostcore.testing import AgentEventConformance


class TestFileCustodyAgentEventConformance(AgentEventConformance):
    @pytest.fixture
    def plugin(self):
        return custody_plugin

    @pytest.fixture
    def plugin_config(self, tmp_path):
        return {"plugins": {"file-custody": {"directory": str(tmp_path / "registry")}}}

    @pytest.fixture
    def entry_point_name(self):
        return "file-custody"

    def test_the_sample_session_is_the_agents_and_ends_ended(self, lean_host, plugin,
                                                               tmp_path):
        from hostcore.testing.agent_event import sample_events

        for event in sample_events(tmp_path):
            self._call(lean_host, plugin, event)
        registry = HeartbeatRegistry(tmp_path / "registry")
        [view] = list_sessions(registry).sessions
        assert (view.instance, view.state, view.owner_kind) == \
            ("conformance-session", "ended", "agent")
        assert view.owner_pid == find_agent().pid


def test_the_lean_handler_keeps_the_same_session_as_the_hook(tmp_path):
    config = {"directory": str(tmp_path / "registry")}
    for name in ("SessionStart", "PostToolUse", "SessionEnd"):
        handle_lean_event(LeanEvent(agent="claude-code", name=name, session_id="lean-1",
                                    cwd=str(tmp_path), root=str(tmp_path), config=config,
                                    budget_seconds=0.5))
        if name == "SessionStart":
            [view] = list_sessions(HeartbeatRegistry(tmp_path / "registry")).sessions
            assert (view.state, view.owner_kind, view.owner_pid) == \
                ("live", "agent", find_agent().pid)
    [view] = list_sessions(HeartbeatRegistry(tmp_path / "registry")).sessions
    assert (view.instance, view.state) == ("lean-1", "ended")


def test_the_lean_handler_refuses_a_config_the_host_would(tmp_path):
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        handle_lean_event(LeanEvent(agent="claude-code", name="SessionStart",
                                    session_id="lean-1", cwd=str(tmp_path),
                                    root=str(tmp_path), config={"directroy": "x"},
                                    budget_seconds=0.5))
    assert not (tmp_path / "plugins").exists()  # nothing made on doubt
