"""The Codex rollout source passes hostcore's source conformance suite."""

from __future__ import annotations

import json
import uuid

import hostcore_codex.plugin as codex_plugin
import pytest

from hostcore.testing import SourceConformance

ROLLOUT = "rollout-2025-07-28T22-54-41-session-1.jsonl"


def append(home, record) -> None:
    path = home / ".codex" / "sessions" / "2025" / "07" / "28" / ROLLOUT
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        header = {"timestamp": "2025-07-28T22:54:41.000Z", "type": "session_meta",
                  "payload": {"id": "session-1", "cwd": "/work/repo"}}
        path.write_text(json.dumps(header) + "\n")
    with path.open("a") as handle:
        handle.write((record if isinstance(record, str) else json.dumps(record)) + "\n")


def event_line() -> dict:
    return {"timestamp": "2025-07-28T22:54:42.000Z", "type": "event_msg",
            "payload": {"type": "agent_message", "id": str(uuid.uuid4())}}


class TestCodexSourceConformance(SourceConformance):
    @pytest.fixture
    def home(self, tmp_path):
        return tmp_path / "home"

    @pytest.fixture
    def plugin(self):
        return codex_plugin

    @pytest.fixture
    def plugin_config(self, home):
        return {"plugins": {"codex": {"home": str(home)}}}

    @pytest.fixture
    def add_evidence(self, home):
        return lambda host: append(home, event_line())

    @pytest.fixture
    def add_malformed(self, home):
        return lambda host: append(home, '{"timestamp": "2025-07-28T22:54:43.000Z", "type"')
