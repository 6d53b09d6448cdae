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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcore.testing import require_tool
from hostcore.testing.fake_http import FakeApiHandler, serving

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
    def __init__(self) -> None:
        self.base_url = ""  # the server's, once it listens
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


def _handler(api: ResponsesApi) -> type[FakeApiHandler]:
    class Handler(FakeApiHandler):
        def do_POST(self) -> None:
            body = self.json_body()
            path = self.path.split("?", 1)[0]
            n = len(api.requests)
            api.requests.append((path, body))
            if not path.endswith("/responses"):
                self.send_bytes(404, b"", None)
                return
            self.send_events(_events(body, n))

        def do_GET(self) -> None:
            self.send_bytes(404, b"", None)

    return Handler


@pytest.fixture
def responses_api() -> Iterator[ResponsesApi]:
    api = ResponsesApi()
    with serving(_handler(api)) as base_url:
        api.base_url = f"{base_url}/v1"
        yield api
