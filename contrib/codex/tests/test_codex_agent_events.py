"""The Codex plugin's ``hostcore_agent_event`` against hostcore's conformance kit, and
what it does at Stop and SessionEnd with the payloads Codex documents: the rollout named
by ``transcript_path`` stored at once."""

from __future__ import annotations

import json
from pathlib import Path

import hostcore_codex.plugin as codex
import pytest

from hostcore.agents.events import decode_event
from hostcore.testing import AgentEventConformance

ROLLOUT = "sessions/2026/01/02/rollout-2026-01-02T10-00-00-c1.jsonl"


def _rollout(home: Path, lines: int) -> Path:
    path = home / ".codex" / ROLLOUT
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        if not path.stat().st_size:
            out.write(json.dumps({"timestamp": "2026-01-02T10:00:00Z", "type": "session_meta",
                                  "payload": {"id": "c1", "cwd": "/work"}}) + "\n")
        for n in range(lines):
            out.write(json.dumps({"timestamp": "2026-01-02T10:00:01Z", "type": "event_msg",
                                  "payload": {"n": n, "size": path.stat().st_size}}) + "\n")
    return path


def _payload(name: str, path: Path, **fields: object) -> bytes:
    """A hook's stdin as Codex documents it (its hooks' input schemas)."""
    payload = {"hook_event_name": name, "session_id": "c1", "cwd": "/work",
               "transcript_path": str(path), "model": "gpt-5", "turn_id": "t1", **fields}
    return json.dumps(payload).encode()


class TestCodexAgentEventConformance(AgentEventConformance):
    @pytest.fixture
    def plugin(self):
        return codex

    @pytest.fixture
    def plugin_config(self, tmp_path):
        return {"plugins": {"codex": {"home": str(tmp_path / "home")}}}

    @pytest.fixture
    def agent_events(self, tmp_path):
        path = tmp_path / "home" / ".codex" / ROLLOUT
        return [decode_event(_payload(name, path), "codex", budget_seconds=1.0)
                for name in ("Stop", "SessionEnd")]

    @pytest.fixture
    def seed_session(self, tmp_path):
        return lambda host: _rollout(tmp_path / "home", 20)


@pytest.fixture
def host(make_host, tmp_path):
    return make_host(codex, config={"plugins": {"codex": {"home": str(tmp_path / "home")}}})


def test_a_documented_stop_payload_stores_the_rollout(host, tmp_path):
    path = _rollout(tmp_path / "home", 4)
    event = decode_event(_payload("Stop", path, stop_hook_active=False,
                                  last_assistant_message="never kept"),
                         "codex", budget_seconds=1.0)
    assert "never kept" not in repr(event)
    codex.hostcore_agent_event(event, host)
    assert host.store.stats()["rows"] == 5  # the header and four lines


def test_session_end_stores_what_came_after_stop_once(host, tmp_path):
    path = _rollout(tmp_path / "home", 2)
    codex.hostcore_agent_event(decode_event(_payload("Stop", path), "codex",
                                            budget_seconds=1.0), host)
    _rollout(tmp_path / "home", 3)
    end = decode_event(_payload("SessionEnd", path, reason="exit"), "codex",
                       budget_seconds=1.0)
    codex.hostcore_agent_event(end, host)
    codex.hostcore_agent_event(end, host)
    assert host.store.stats()["rows"] == 6
    assert host.tick().ok
    assert host.store.stats()["rows"] == 6


def test_claude_codes_events_are_not_read_as_codexs(host, tmp_path):
    path = _rollout(tmp_path / "home", 2)
    codex.hostcore_agent_event(decode_event(_payload("Stop", path), "claude-code",
                                            budget_seconds=1.0), host)
    assert host.store.stats()["rows"] == 0
