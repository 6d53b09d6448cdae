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

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hostcore.testing import require_tool

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

    def __init__(self, port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}"
        self.requests: list[tuple[str, dict[str, Any]]] = []

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
    start = {"type": "message_start", "message": {
        "id": f"msg_{kind}", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": usage}}
    if kind == "tool_use":
        block = {"type": "tool_use", "id": "toolu_hostcore", "name": "Bash", "input": {}}
        delta = {"type": "input_json_delta",
                 "partial_json": json.dumps({"command": TOOL_COMMAND,
                                             "description": "say something"})}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "The command printed its line."}
        stop = "end_turn"
    return [start,
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": 9}},
            {"type": "message_stop"}]


def _handler(api: MessagesApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output is the test's

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw)
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            api.requests.append((path, body))
            if path.endswith("/count_tokens"):
                self._json({"input_tokens": 12})
            elif path == "/v1/messages" and body.get("stream"):
                self._stream(_events(_answer_kind(body)))
            elif path == "/v1/messages":
                kind = _answer_kind(body)
                events = _events(kind)
                message = dict(events[0]["message"])
                message["content"] = [{"type": "text", "text": "ok"}]
                message["stop_reason"] = "end_turn"
                self._json(message)
            else:
                self._json({"type": "error", "error": {"type": "not_found_error",
                                                       "message": "not here"}}, 404)

        def do_GET(self) -> None:
            self._json({"type": "error", "error": {"type": "not_found_error",
                                                   "message": "not here"}}, 404)

        def _json(self, data: dict[str, Any], status: int = 200) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, events: list[dict[str, Any]]) -> None:
            payload = b"".join(
                f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def messages_api() -> Iterator[MessagesApi]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    api = MessagesApi(server.server_address[1])
    server.RequestHandlerClass = _handler(api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
