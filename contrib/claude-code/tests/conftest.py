"""The real Claude Code, run offline against a fake Messages API on 127.0.0.1.

``claude_code`` finds the native ``claude`` binary of the npm package
``@anthropic-ai/claude-code`` (``.ci/run`` installs it into ``$HOSTCORE_CLAUDE_CODE_DIR``):
under that folder, else under ``node_modules`` beside the repository. Missing, the
test is skipped, or failed where ``$HOSTCORE_REQUIRED_TOOLS`` says it must run.

``messages_api`` answers ``POST /v1/messages`` as the Messages API streams (server-sent
events ``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``):
a request that carries no tool result gets one ``tool_use`` turn (``Bash``, ``echo``),
the next a text answer; ``/v1/messages/count_tokens`` gets a count.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcore.testing import require_tool

_spec = importlib.util.spec_from_file_location(
    "claude_code_fake_messages_api", Path(__file__).with_name("fake_messages_api.py"))
assert _spec is not None and _spec.loader is not None
fake_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_api)

REPO = Path(__file__).resolve().parents[3]
ENV_DIR = "HOSTCORE_CLAUDE_CODE_DIR"
VERSION = "2.1.328"
INSTALL = f"npm install --prefix DIR @anthropic-ai/claude-code@{VERSION}; export {ENV_DIR}=DIR"
TOOL_COMMAND = "echo hostcore-hook-test"


def find_claude() -> Path | None:
    """The native ``claude`` binary of the npm package, where ``.ci/run`` puts it."""
    folders = [Path(os.environ[ENV_DIR])] if os.environ.get(ENV_DIR) else []
    folders.append(REPO)
    for folder in folders:
        found = folder / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
        if found.is_file() and os.access(found, os.X_OK):
            return found
    return None


@pytest.fixture(scope="session")
def claude_code() -> Path:
    found = find_claude()
    require_tool("claude-code", INSTALL, found=found is not None)
    assert found is not None
    return found


class MessagesApi:
    """What the fake API was asked: each request's path and decoded body."""

    def __init__(self) -> None:
        self.base_url = ""  # the server's, once it listens
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def seen(self, path: str, body: dict[str, Any]) -> None:
        self.requests.append((path, body))

    def turns(self) -> list[str]:
        """The kind of answer given to each streamed /v1/messages request, in order."""
        return [_answer_kind(body) for path, body in self.requests
                if path == "/v1/messages" and body.get("stream")]


def _has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list) and any(
                isinstance(c, dict) and c.get("type") == "tool_result" for c in content):
            return True
    return False


def _answer_kind(body: dict[str, Any]) -> str:
    offers_bash = any(t.get("name") == "Bash" for t in body.get("tools", []) or [])
    return "tool_use" if offers_bash and not _has_tool_result(body) else "text"


def _events(kind: str) -> list[dict[str, Any]]:
    usage = {"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    if kind == "tool_use":
        block = {"type": "tool_use", "id": "toolu_hostcore", "name": "Bash", "input": {}}
        delta = {"type": "input_json_delta",
                 "partial_json": json.dumps({"command": TOOL_COMMAND,
                                             "description": "say something"})}
        return fake_api.message_events(f"msg_{kind}", block, delta, "tool_use", usage)
    delta = {"type": "text_delta", "text": "The command printed its line."}
    return fake_api.message_events(f"msg_{kind}", {"type": "text", "text": ""}, delta,
                                   "end_turn", usage)


def _stream(body: dict[str, Any]) -> list[dict[str, Any]]:
    return _events(_answer_kind(body))


def _reply(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if path != "/v1/messages":
        return 404, fake_api.NOT_FOUND
    message = dict(_events(_answer_kind(body))[0]["message"])
    message["content"] = [{"type": "text", "text": "ok"}]
    message["stop_reason"] = "end_turn"
    return 200, message


@pytest.fixture
def messages_api() -> Iterator[MessagesApi]:
    api = MessagesApi()
    with fake_api.serving(_stream, _reply, api.seen) as base_url:
        api.base_url = base_url
        yield api
