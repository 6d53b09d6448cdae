"""The runner against the real ``gh`` binary, talking to a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import pytest
import tenacity
from hostcore_gh.runner import GhRunner

from hostcore.testing import require_tool


@pytest.fixture
def real_gh(fake_github):
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")
    return GhRunner(env=fake_github.env(), wait=tenacity.wait_none(), timeout=20)


def test_real_gh_ok_response_through_the_fake_api(real_gh, fake_github):
    fake_github.route("/repos/o/r", 200, {"full_name": "o/r"}, {"X-RateLimit-Remaining": "99"})
    response = real_gh.api("repos/o/r")
    assert response.status == 200
    assert response.json() == {"full_name": "o/r"}
    assert response.headers["x-ratelimit-remaining"] == "99"
    assert fake_github.requests[0]["host"] == "api.github.localhost"
    assert fake_github.requests[0]["authorization"] == "token test-token-not-real"


def test_real_gh_404_exits_1_and_reads_as_404(real_gh, fake_github):
    response = real_gh.api("repos/o/r/issues/77")
    assert response.status == 404
    assert response.message() == "Not Found"


def test_real_gh_server_error_is_retried(real_gh, fake_github):
    fake_github.route("/repos/o/r", 502, {"message": "bad gateway"})
    fake_github.route("/repos/o/r", 200, {"ok": True})
    assert real_gh.api("repos/o/r").json() == {"ok": True}
    assert len(fake_github.requests) == 2


def test_real_gh_rate_limit_headers_survive(real_gh, fake_github):
    fake_github.route("/repos/o/r", 403, {"message": "API rate limit exceeded"},
                      {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1900000000"})
    response = real_gh.api("repos/o/r")
    assert response.rate_limited
    assert response.rate_limit_reset() is not None
    assert len(fake_github.requests) == 1


def test_real_gh_reports_available(real_gh):
    assert real_gh.availability() is None
