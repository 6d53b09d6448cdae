"""The real Codex CLI, run offline against a fake Responses API on 127.0.0.1.

``codex_cli`` finds the native ``codex`` binary of the npm package ``@openai/codex``
(``.ci/run`` installs it into ``$HOSTCORE_CODEX_DIR``): under that folder, else under
``node_modules`` beside the repository. Missing, the test is skipped, or failed where
``$HOSTCORE_REQUIRED_TOOLS`` says it must run.

``responses_api`` answers ``POST /v1/responses`` as the Responses API streams
(``response.created``, ``response.output_item.added`` / ``done``,
``response.completed``): a request offering ``exec_command`` with no call output yet
gets one call of it (``echo``), the next a text answer.
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
ENV_DIR = "HOSTCORE_CODEX_DIR"
VERSION = "0.169.0"
INSTALL = f"npm install --prefix DIR @openai/codex@{VERSION}; export {ENV_DIR}=DIR"
TOOL_COMMAND = "echo hostcore-hook-test"


def find_codex() -> Path | None:
    folders = [Path(os.environ[ENV_DIR])] if os.environ.get(ENV_DIR) else []
    folders.append(REPO)
    for folder in folders:
        vendor = folder / "node_modules" / "@openai" / "codex-linux-x64" / "vendor"
        for found in sorted(vendor.glob("*/bin/codex")):
            if found.is_file() and os.access(found, os.X_OK):
                return found
    return None


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    found = find_codex()
    require_tool("codex", INSTALL, found=found is not None)
    assert found is not None
    return found


class ResponsesApi:
    def __init__(self, port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def answers(self) -> list[str]:
        """The kind of answer given to each /v1/responses request, in order."""
        return [_answer(body, n)["type"] for n, (path, body) in enumerate(self.requests)
                if path.endswith("/responses")]


def _answer(body: dict[str, Any], n: int) -> dict[str, Any]:
    offered = {t.get("name") for t in body.get("tools", []) or [] if isinstance(t, dict)}
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output"
                   for i in body.get("input", []) or [])
    if "exec_command" in offered and not answered:
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "name": "exec_command", "arguments": json.dumps({"cmd": TOOL_COMMAND}),
                "status": "completed"}
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "The command printed its line.",
                         "annotations": []}]}


def _events(body: dict[str, Any], n: int) -> list[dict[str, Any]]:
    item = _answer(body, n)
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    response = {"id": f"resp_{n}", "object": "response", "created_at": 0, "model": "gpt-5",
                "output": []}
    return [{"type": "response.created", "response": {**response, "status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "status": "in_progress"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {**response, "status": "completed",
                                                        "output": [item], "usage": usage}}]


def _handler(api: ResponsesApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length)) if length else {}
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            n = len(api.requests)
            api.requests.append((path, body))
            if not path.endswith("/responses"):
                self._empty(404)
                return
            payload = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                               for e in _events(body, n))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._empty(404)

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@pytest.fixture
def responses_api() -> Iterator[ResponsesApi]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    api = ResponsesApi(server.server_address[1])
    server.RequestHandlerClass = _handler(api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
