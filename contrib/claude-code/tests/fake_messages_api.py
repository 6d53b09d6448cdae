"""The plumbing of a fake Anthropic Messages API on 127.0.0.1, for the real Claude Code.

Each test module decides what the model says; this module holds what every such fake
does alike: a streamed turn's server-sent events (``message_start``, one
``content_block_*``, ``message_delta``, ``message_stop``), the count of
``/v1/messages/count_tokens``, and a threaded server that lives as long as a ``with``.
The test directory is no package (``--import-mode=importlib``), so its users load this
file by path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Body = dict[str, Any]
Events = list[dict[str, Any]]
# A request the fake does not stream (a title, a quota probe): its status and JSON body.
Reply = Callable[[str, Body], tuple[int, Body]]
NOT_FOUND: Body = {"type": "error", "error": {"type": "not_found_error", "message": "not here"}}


def message_events(message_id: str, block: Body, delta: Body, stop_reason: str,
                   usage: Body) -> Events:
    """One assistant turn of a single content block, as the API streams it."""
    start = {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": usage}}
    return [start,
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                "stop_sequence": None},
             "usage": {"output_tokens": 9}},
            {"type": "message_stop"}]


def _handler(stream: Callable[[Body], Events], reply: Reply,
             seen: Callable[[str, Body], None]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output is the test's

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) if length else b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            seen(path, body)
            if path.endswith("/count_tokens"):
                self._send(200, json.dumps({"input_tokens": 12}).encode(), "application/json")
            elif path == "/v1/messages" and body.get("stream"):
                self._send(200, b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                                         for e in stream(body)), "text/event-stream")
            else:
                status, data = reply(path, body)
                self._send(status, json.dumps(data).encode(), "application/json")

        def do_GET(self) -> None:
            self._send(404, json.dumps(NOT_FOUND).encode(), "application/json")

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _unrecorded(path: str, body: Body) -> None:
    pass  # a fake that keeps what it streams records it in ``stream``


@contextmanager
def serving(stream: Callable[[Body], Events], reply: Reply,
            seen: Callable[[str, Body], None] = _unrecorded) -> Iterator[str]:
    """Serve the fake until the ``with`` ends; yields its base URL.

    ``seen`` is told every POST before it is answered, ``stream`` answers a streamed
    ``/v1/messages`` with its events, ``reply`` any other POST.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stream, reply, seen))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
