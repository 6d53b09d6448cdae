"""The plumbing of a fake Anthropic Messages API on 127.0.0.1, for the real Claude Code.

Each test module decides what the model says; this module holds what every such fake
does alike: a streamed turn's server-sent events (``message_start``, one
``content_block_*``, ``message_delta``, ``message_stop``), the count of
``/v1/messages/count_tokens``, served by :mod:`hostcore.testing.fake_http` as long as a
``with``.
The test directory is no package (``--import-mode=importlib``), so its users load this
file by path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hostcore.testing import fake_http
from hostcore.testing.fake_http import FakeApiHandler

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
             seen: Callable[[str, Body], None]) -> type[FakeApiHandler]:
    class Handler(FakeApiHandler):
        def do_POST(self) -> None:
            body = self.json_body()
            path = self.path.split("?", 1)[0]
            seen(path, body)
            if path.endswith("/count_tokens"):
                self.send_json({"input_tokens": 12})
            elif path == "/v1/messages" and body.get("stream"):
                self.send_events(stream(body))
            else:
                status, data = reply(path, body)
                self.send_json(data, status)

        def do_GET(self) -> None:
            self.send_json(NOT_FOUND, 404)

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
    with fake_http.serving(_handler(stream, reply, seen)) as base_url:
        yield base_url
