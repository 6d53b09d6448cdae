"""The file custody plugin's ``hostcore_agent_event`` against hostcore's conformance kit:
every event of both agents taken quietly within its budget, tool events cheap, each
event sent twice (a retried hook); the sessions it starts are the agent's (here, the
nearest ancestor of the test process that is not a shell)."""

from __future__ import annotations

import hostcore_file_custody.plugin as custody_plugin
import pytest
from hostcore_file_custody import HeartbeatRegistry, find_agent, list_sessions

from hostcore.testing import AgentEventConformance


class TestFileCustodyAgentEventConformance(AgentEventConformance):
    @pytest.fixture
    def plugin(self):
        return custody_plugin

    @pytest.fixture
    def plugin_config(self, tmp_path):
        return {"plugins": {"file-custody": {"directory": str(tmp_path / "registry")}}}

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
