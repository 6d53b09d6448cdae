"""hostcore.testing.fake_http: a real server on 127.0.0.1, asked with urllib."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from hostcore.testing.fake_http import FakeApiHandler, serving

BODIES: list[dict[str, Any]] = []


class EchoHandler(FakeApiHandler):
    def do_POST(self) -> None:
        body = self.json_body()
        BODIES.append(body)
        if self.path == "/stream":
            self.send_events([{"type": "start", "n": 1}, {"type": "stop"}])
        elif self.path == "/empty":
            self.send_bytes(404, b"", None)
        else:
            self.send_json({"echo": body}, 201)


def _post(url: str, data: bytes) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type") or "", exc.read()


@pytest.fixture(autouse=True)
def _no_bodies() -> None:
    BODIES.clear()


def test_a_json_post_is_decoded_and_answered_as_json_with_its_status():
    with serving(EchoHandler) as base_url:
        status, content_type, payload = _post(f"{base_url}/echo", b'{"a": [1, 2]}')
    assert (status, content_type) == (201, "application/json")
    assert json.loads(payload) == {"echo": {"a": [1, 2]}}


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b""])
def test_a_body_that_is_no_json_object_reads_as_an_empty_one(data):
    with serving(EchoHandler) as base_url:
        status, _, payload = _post(f"{base_url}/echo", data)
    assert status == 201
    assert json.loads(payload) == {"echo": {}}
    assert BODIES == [{}]


def test_events_are_sent_as_server_sent_events_named_by_their_type():
    with serving(EchoHandler) as base_url:
        status, content_type, payload = _post(f"{base_url}/stream", b"{}")
    assert (status, content_type) == (200, "text/event-stream")
    assert payload.decode() == ('event: start\ndata: {"type": "start", "n": 1}\n\n'
                                'event: stop\ndata: {"type": "stop"}\n\n')


def test_an_answer_without_a_content_type_sends_none():
    with serving(EchoHandler) as base_url:
        status, content_type, payload = _post(f"{base_url}/empty", b"{}")
    assert (status, content_type, payload) == (404, "", b"")

