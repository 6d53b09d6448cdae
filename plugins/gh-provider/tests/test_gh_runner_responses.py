"""The runner decides from the printed status line and headers, never the exit code."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import tenacity
from hostcore_gh.runner import (
    GhAuthError,
    GhCancelled,
    GhProtocolError,
    GhResponse,
    GhRunner,
    GhTimeout,
    GhTransportError,
    GhUnavailable,
    parse_output,
)


def runner(fake_gh, **kw):
    return GhRunner(env=fake_gh.env, wait=tenacity.wait_none(), **kw)


def test_ok_response_carries_status_lowercase_headers_and_body(fake_gh):
    fake_gh.route("repos/o/r",
                  fake_gh.reply(200, {"id": 1}, headers={"X-RateLimit-Remaining": "7"}))
    response = runner(fake_gh).api("/repos/o/r")
    assert response.status == 200
    assert response.headers["x-ratelimit-remaining"] == "7"
    assert response.json() == {"id": 1}


def test_http_error_with_exit_1_is_a_response_not_an_exception(fake_gh):
    fake_gh.route("repos/o/r/issues/9", fake_gh.reply(404, {"message": "Not Found"}))
    response = runner(fake_gh).api("repos/o/r/issues/9")
    assert response.status == 404
    assert response.message() == "Not Found"


def test_not_modified_exits_1_yet_reads_as_304(fake_gh):
    fake_gh.route("repos/o/r/events", fake_gh.reply(304, body=""))
    response = runner(fake_gh).api("repos/o/r/events", headers={"If-None-Match": '"abc"'})
    assert response.status == 304
    assert fake_gh.calls()[0]["headers"]["if-none-match"] == '"abc"'


def test_error_status_printed_with_exit_0_is_still_an_error(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(422, {"message": "Validation Failed"}, exit=0))
    response = runner(fake_gh).api("repos/o/r")
    assert response.status == 422
    assert not response.ok


def test_server_errors_are_retried_until_an_answer(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(502), fake_gh.reply(503), fake_gh.reply(200, []))
    response = runner(fake_gh).api("repos/o/r")
    assert response.status == 200
    assert len(fake_gh.calls()) == 3


def test_server_errors_stop_after_the_attempt_bound_and_return_the_last(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(500))
    gh = runner(fake_gh, attempts=2)
    assert gh.api("repos/o/r").status == 500
    assert len(fake_gh.calls()) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 429])
def test_client_errors_are_never_retried(fake_gh, status):
    fake_gh.route("repos/o/r", fake_gh.reply(status))
    assert runner(fake_gh).api("repos/o/r").status == status
    assert len(fake_gh.calls()) == 1


def test_no_response_is_a_transport_error_retried_then_raised(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(raw="", exit=1, stderr="dial tcp: connection refused"))
    with pytest.raises(GhTransportError, match="connection refused"):
        runner(fake_gh).api("repos/o/r")
    assert len(fake_gh.calls()) == 3


def test_missing_login_says_run_gh_auth_login_and_is_not_retried(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(
        raw="", exit=4, stderr="To get started with GitHub CLI, please run:  gh auth login"))
    with pytest.raises(GhAuthError, match="gh auth login"):
        runner(fake_gh).api("repos/o/r")
    assert len(fake_gh.calls()) == 1


def test_exit_0_without_status_line_is_a_protocol_error(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(raw="[]", exit=0))
    with pytest.raises(GhProtocolError, match="status line"):
        runner(fake_gh).api("repos/o/r")


def test_non_json_body_is_a_protocol_error_naming_the_status(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(200, body="<html>"))
    with pytest.raises(GhProtocolError, match="HTTP 200"):
        runner(fake_gh).api("repos/o/r").json()


def test_params_become_the_query_and_method_is_passed(fake_gh):
    fake_gh.route("repos/o/r/issues", fake_gh.reply(200, []), query={"page": "2"})
    runner(fake_gh).api("repos/o/r/issues", params={"state": "open", "page": "2"})
    call = fake_gh.calls()[0]
    assert call["query"] == {"state": "open", "page": "2"}
    assert call["method"] == "GET"
    assert call["argv"][:2] == ["api", "-i"]


@pytest.mark.parametrize(
    ("status", "headers", "limited"),
    [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1900000000"}, True),
        (429, {"retry-after": "30"}, True),
        (403, {"x-ratelimit-remaining": "12"}, False),
        (200, {"x-ratelimit-remaining": "0"}, False),
    ],
)
def test_rate_limit_is_read_from_status_and_headers(fake_gh, status, headers, limited):
    fake_gh.route("rate", fake_gh.reply(status, headers=headers))
    response = runner(fake_gh).api("rate")
    assert response.rate_limited is limited
    assert response.auth_failed is (status == 403 and not limited)


def test_rate_limit_reset_from_epoch_header_and_from_retry_after():
    epoch = parse_output(b"HTTP/2.0 403 Forbidden\nx-ratelimit-remaining: 0\r\n"
                         b"x-ratelimit-reset: 1900000000\r\n\r\n{}")
    assert epoch is not None
    assert epoch.rate_limit_reset() == datetime.fromtimestamp(1900000000, UTC)
    after = parse_output(b"HTTP/2.0 429 Too Many\nretry-after: 60\r\n\r\n{}")
    assert after is not None
    assert after.rate_limit_reset(now=1000.0) == datetime.fromtimestamp(1060, UTC)


def test_repeated_headers_are_joined_and_body_keeps_blank_lines():
    parsed = parse_output(b"HTTP/1.1 200 OK\nLink: <a>\r\nlink: <b>\r\n\r\n\"x\n\ny\"")
    assert parsed is not None
    assert parsed.headers == {"link": "<a>, <b>"}
    assert parsed.body == b'"x\n\ny"'


def test_output_without_status_line_does_not_parse():
    assert parse_output(b'{"message": "Bad credentials"}') is None
    assert parse_output(b"") is None


def test_availability_names_a_missing_executable(tmp_path):
    gh = GhRunner(executable="gh-not-installed-here", env={"PATH": str(tmp_path)})
    reason = gh.availability()
    assert reason is not None and "not installed" in reason
    with pytest.raises(GhUnavailable):
        gh.api("repos/o/r")


def test_availability_is_none_when_gh_runs(fake_gh):
    assert runner(fake_gh).availability() is None


def test_a_secondary_rate_limit_without_headers_is_a_rate_limit_not_bad_credentials():
    response = parse_output(
        b"HTTP/2.0 403 Forbidden\n\r\n"
        b'{"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}')
    assert response is not None
    assert response.rate_limited and not response.auth_failed


@pytest.mark.parametrize(
    ("headers", "after"),
    [
        ({"retry-after": "30", "x-ratelimit-remaining": "0",
          "x-ratelimit-reset": "1900000000"}, timedelta(seconds=30)),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1780315500"},
         timedelta(minutes=5)),
        ({"x-ratelimit-reset": "1780315500"}, timedelta(minutes=1)),  # requests are left
        ({}, timedelta(minutes=1)),  # a secondary limit naming no time: at least a minute
    ],
)
def test_retry_at_follows_githubs_documented_rules(headers, after):
    now = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)  # 1780315200
    response = GhResponse(status=403, headers=headers, body=b'{"message": "rate limit"}')
    assert response.retry_at(now) == now + after


def test_a_call_that_outlives_its_deadline_kills_gh_and_raises_timeout(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(200, [], sleep=30))
    started = time.monotonic()
    # The deadline leaves a loaded machine time to start gh (it must be seen asking);
    # the answer would take 30 s, so ending well before that is the kill.
    with pytest.raises(GhTimeout):
        runner(fake_gh).api("repos/o/r", deadline=time.monotonic() + 4)
    assert time.monotonic() - started < 15
    assert len(fake_gh.calls()) == 1  # no retry after the deadline


def test_retries_never_outlast_the_deadline(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(502, sleep=0.4))
    started = time.monotonic()
    try:  # the last 5xx answer, or the attempt the deadline cut short
        outcome: object = runner(fake_gh, attempts=10).api(
            "repos/o/r", deadline=time.monotonic() + 1.0).status
    except GhTimeout:
        outcome = "timeout"
    assert time.monotonic() - started < 1.5
    assert outcome in (502, "timeout") and len(fake_gh.calls()) < 10


def test_a_set_cancel_event_kills_gh_at_once(fake_gh):
    fake_gh.route("repos/o/r", fake_gh.reply(200, [], sleep=30))
    cancel = threading.Event()
    # Set once gh has been seen asking (it is then under way, its answer 30 s off).
    def cancel_once_asked() -> None:
        give_up = time.monotonic() + 60
        while not fake_gh.calls() and time.monotonic() < give_up:
            time.sleep(0.02)
        cancel.set()
    threading.Thread(target=cancel_once_asked, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(GhCancelled):
        runner(fake_gh).api("repos/o/r", cancel=cancel)
    assert time.monotonic() - started < 15
    with pytest.raises(GhCancelled):  # and nothing more is started once it is set
        runner(fake_gh).api("repos/o/r", cancel=cancel)
    assert len(fake_gh.calls()) == 1
