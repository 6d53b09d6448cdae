"""The Claude Code transcript source passes hostcore's source conformance suite."""

from __future__ import annotations

import json
import uuid

import hostcore_claude_code.plugin as claude_plugin
import pytest

from hostcore.testing import SourceConformance


def append(home, text: str) -> None:
    path = home / ".claude" / "projects" / "-work-repo" / "session-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(text + "\n")


def conversation_line() -> str:
    return json.dumps({"parentUuid": None, "isSidechain": False, "userType": "external",
                       "cwd": "/work/repo", "sessionId": "session-1", "version": "2.0.61",
                       "gitBranch": "main", "type": "user",
                       "message": {"role": "user", "content": "hello"},
                       "uuid": str(uuid.uuid4()), "timestamp": "2025-07-28T22:54:41.466Z"})


class TestClaudeCodeSourceConformance(SourceConformance):
    @pytest.fixture
    def home(self, tmp_path):
        return tmp_path / "home"

    @pytest.fixture
    def plugin(self):
        return claude_plugin

    @pytest.fixture
    def plugin_config(self, home):
        return {"plugins": {"claude-code": {"home": str(home)}}}

    @pytest.fixture
    def add_evidence(self, home):
        return lambda host: append(home, conversation_line())

    @pytest.fixture
    def add_malformed(self, home):
        return lambda host: append(home, '{"type": "user", "cwd": ')
