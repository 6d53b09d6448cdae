"""A fake HTTP API on 127.0.0.1, for tests that run a real client (an agent) offline.

Subclass :class:`FakeApiHandler` with the ``do_POST`` / ``do_GET`` your API needs and
serve it for the length of a ``with``::

    class Handler(FakeApiHandler):
        def do_POST(self) -> None:
            body = self.json_body()
            self.send_events([{"type": "done", "echo": body}])

    with serving(Handler) as base_url:
        run_the_client(base_url)

Not imported by :mod:`hostcore.testing` itself (every pytest run loads that): import
it from here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeApiHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler with the reading and answering a JSON API does."""

    # Keep-alive, as real API clients expect; every answer says its length.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test's output is the test's

    def json_body(self) -> dict[str, Any]:
        """The request's JSON object; ``{}`` when it has no body or another one."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length)) if length else {}
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def send_bytes(self, status: int, payload: bytes, content_type: str | None) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.send_bytes(status, json.dumps(data).encode(), "application/json")

    def send_events(self, events: Iterable[dict[str, Any]]) -> None:
        """A stream of server-sent events, each named by its ``type``, sent whole."""
        self.send_bytes(200, b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                                      for e in events), "text/event-stream")


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free port of 127.0.0.1, one thread per request, until the
    ``with`` ends; yields the base URL (``http://127.0.0.1:PORT``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
