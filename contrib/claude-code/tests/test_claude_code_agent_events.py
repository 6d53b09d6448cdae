"""The Claude Code plugin's ``hostcore_agent_event`` against hostcore's conformance kit, and
what it does at Stop and SessionEnd: the session's transcript stored at once, bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import hostcore_claude_code.plugin as claude_code
import pytest

from hostcore.agents.events import AgentEvent
from hostcore.testing import AgentEventConformance


def _transcript(home: Path, session: str, lines: int, first: int = 0) -> Path:
    path = home / ".claude" / "projects" / "-work" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for n in range(first, first + lines):
            out.write(json.dumps({"type": "user", "cwd": "/work", "sessionId": session,
                                  "uuid": f"{session}-{n}",
                                  "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
    return path


def _event(name: str, path: Path, budget: float = 1.0, agent: str = "claude-code"
           ) -> AgentEvent:
    return AgentEvent(agent=agent, name=name, session_id="s1", cwd="/work",  # type: ignore[arg-type]
                      transcript_path=str(path), budget_seconds=budget)


class TestClaudeCodeAgentEventConformance(AgentEventConformance):
    @pytest.fixture
    def plugin(self):
        return claude_code

    @pytest.fixture
    def plugin_config(self, tmp_path):
        return {"plugins": {"claude-code": {"home": str(tmp_path / "home")}}}

    @pytest.fixture
    def agent_events(self, tmp_path):
        path = tmp_path / "home" / ".claude" / "projects" / "-work" / "s1.jsonl"
        return [_event("Stop", path), _event("SessionEnd", path)]

    @pytest.fixture
    def seed_session(self, tmp_path):
        return lambda host: _transcript(tmp_path / "home", "s1", 30)


@pytest.fixture
def host(make_host, tmp_path):
    return make_host(claude_code, config={"plugins": {"claude-code": {
        "home": str(tmp_path / "home")}}})


def test_stop_stores_the_sessions_rows_and_session_end_only_what_came_after(host, tmp_path):
    path = _transcript(tmp_path / "home", "s1", 12)
    claude_code.hostcore_agent_event(_event("Stop", path), host)
    assert host.store.stats()["rows"] == 12
    _transcript(tmp_path / "home", "s1", 3, first=12)
    claude_code.hostcore_agent_event(_event("SessionEnd", path), host)
    assert host.store.stats()["rows"] == 15
    # The file replaced by a copy (another inode) is read again from its start: the
    # keys make that add nothing.
    copy = path.with_suffix(".copy")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)
    claude_code.hostcore_agent_event(_event("SessionEnd", path), host)
    assert host.store.stats()["rows"] == 15


def test_another_agents_events_and_tool_events_read_nothing(host, tmp_path):
    path = _transcript(tmp_path / "home", "s1", 5)
    claude_code.hostcore_agent_event(_event("Stop", path, agent="codex"), host)
    claude_code.hostcore_agent_event(_event("PostToolUse", path), host)
    assert host.store.stats()["rows"] == 0


def test_a_spent_budget_leaves_the_transcript_to_the_next_tick(host, tmp_path):
    path = _transcript(tmp_path / "home", "s1", 5)
    claude_code.hostcore_agent_event(_event("SessionEnd", path, budget=0.0), host)
    assert host.store.stats()["rows"] == 0
    assert host.tick().ok
    assert host.store.stats()["rows"] == 5


def test_a_large_transcript_is_stored_in_batches_within_the_budget(host, tmp_path):
    path = _transcript(tmp_path / "home", "big", 12_000)  # more than one read's lines
    claude_code.hostcore_agent_event(_event("Stop", path, budget=30.0), host)
    assert host.store.stats()["rows"] == 12_000
