"""The gh provider through the real ``gh`` binary (gh 2.23 from Debian), against a fake
GitHub on 127.0.0.1: pagination, closure, 404 and rate limit."""

from __future__ import annotations

import pytest
import tenacity
from hostcore_gh.provider import GhConfig, GhProvider
from hostcore_gh.runner import GhRunner

from hostcore.testing import require_tool
from hostcore.workitems.items import ProviderError, WorkItemRef

PAGE = ("/repos/o/r/issues?state=open&per_page=100&sort=updated&direction=desc&labels=agent"
        "&page=")


@pytest.fixture
def provider(fake_github):
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none(), timeout=20)
    return GhProvider(GhConfig(repos=["o/r"], labels=["agent"]), runner)


def test_real_gh_lists_every_page(provider, fake_github):
    link = '<http://api.github.localhost/repositories/1/issues?page=2>; rel="next"'
    fake_github.route(f"{PAGE}1", 200, [{"number": 1, "updated_at": "a"}], {"Link": link})
    fake_github.route(f"{PAGE}2", 200, [{"number": 2, "updated_at": "b",
                                         "pull_request": {"url": "x"}}])
    (scope,) = provider.list_items().scopes
    assert scope.status == "complete"
    assert [(i.ref.ref, i.kind) for i in scope.items] == [("o/r#1", "issue"),
                                                          ("o/r#2", "pull_request")]
    assert [r["query"]["page"] for r in fake_github.requests] == ["1", "2"]


def test_real_gh_rate_limited_listing_is_degraded(provider, fake_github):
    fake_github.route(f"{PAGE}1", 403, {"message": "API rate limit exceeded"},
                      {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1900000000"})
    (scope,) = provider.list_items().scopes
    assert scope.status == "degraded" and scope.reset_at == "2030-03-17T17:46:40Z"


def test_real_gh_closure_closed_and_open(provider, fake_github):
    fake_github.route("/repos/o/r/issues/5", 200, {"number": 5, "state": "closed",
                                                   "state_reason": "completed"})
    fake_github.route("/repos/o/r/issues/6", 200, {"number": 6, "state": "open"})
    closed = provider.closure(WorkItemRef("o/r#5"))
    assert closed.state == "closed" and closed.state_reason == "completed"
    assert provider.closure(WorkItemRef("o/r#6")).state == "open"


def test_real_gh_closure_404_names_the_ref(provider, fake_github):
    with pytest.raises(ProviderError, match=r"o/r#77.*404"):
        provider.closure(WorkItemRef("o/r#77"))


def test_real_gh_closure_rate_limit_degrades(provider, fake_github):
    fake_github.route("/repos/o/r/issues/5", 429, {"message": "secondary rate limit"},
                      {"Retry-After": "120"})
    with pytest.raises(ProviderError, match="rate limit") as info:
        provider.closure(WorkItemRef("o/r#5"))
    assert info.value.degrades_scope
