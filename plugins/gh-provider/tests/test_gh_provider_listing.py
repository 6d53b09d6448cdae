"""The gh provider's listing, closure question, ownership and configuration, against
the fake ``gh`` executable."""

from __future__ import annotations

import pytest
import tenacity
from hostcore_gh.provider import GhConfig, GhProvider, check_config
from hostcore_gh.runner import GhRunner

from hostcore.errors import ConfigError
from hostcore.workitems.items import ProviderError, WorkItemRef

ISSUES = "repos/o/r/issues"


def issue(number: int, **extra):
    return {"number": number, "title": f"t{number}", "updated_at": "2026-01-01T00:00:00Z",
            "html_url": f"https://github.com/o/r/issues/{number}", **extra}


def make(fake_gh, repos=("o/r",), labels=(), **kw) -> GhProvider:
    runner = GhRunner(env=fake_gh.env, wait=tenacity.wait_none())
    return GhProvider(GhConfig(repos=list(repos), labels=list(labels)), runner, **kw)


def page_link(n: int, last: int) -> dict[str, str]:
    base = "https://api.github.com/repositories/1/issues?state=open&per_page=100"
    parts = []
    if n < last:
        parts.append(f'<{base}&page={n + 1}>; rel="next"')
    parts.append(f'<{base}&page={last}>; rel="last"')
    return {"Link": ", ".join(parts)}


def test_listing_walks_every_page_named_by_link(fake_gh):
    for n in (1, 2, 3):
        fake_gh.route(ISSUES, fake_gh.reply(200, [issue(n * 10 + i) for i in range(2)],
                                            headers=page_link(n, 3)), query={"page": str(n)})
    (scope,) = make(fake_gh).list_items().scopes
    assert scope.status == "complete"
    assert [i.ref.ref for i in scope.items] == [f"o/r#{n}" for n in (10, 11, 20, 21, 30, 31)]
    assert [c["query"]["page"] for c in fake_gh.calls()] == ["1", "2", "3"]
    assert all(c["query"]["state"] == "open" and c["query"]["per_page"] == "100"
               for c in fake_gh.calls())


def test_without_link_header_a_full_page_asks_for_the_next(fake_gh):
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(n) for n in range(1, 101)]),
                  query={"page": "1"})
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(101)]), query={"page": "2"})
    (scope,) = make(fake_gh).list_items().scopes
    assert scope.status == "complete" and len(scope.items) == 101


def test_running_out_of_pages_is_interrupted_not_complete(fake_gh):
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(1, updated_at="2026-03-02T00:00:00Z")],
                                        headers=page_link(1, 9)), query={"page": "1"})
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(2, updated_at="2026-03-01T00:00:00Z")],
                                        headers=page_link(2, 9)), query={"page": "2"})
    (scope,) = make(fake_gh, max_pages=2).list_items().scopes
    assert scope.status == "interrupted" and "2 pages" in scope.reason
    # What was listed is kept, and pages come most recently changed first: the listing
    # is complete for everything changed after the last item it reached.
    assert [i.ref.ref for i in scope.items] == ["o/r#1", "o/r#2"]
    assert scope.changed_since == "2026-03-01T00:00:00Z"
    assert all(c["query"]["sort"] == "updated" and c["query"]["direction"] == "desc"
               for c in fake_gh.calls())


def test_each_label_is_listed_and_items_with_any_of_them_merge(fake_gh):
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(1), issue(2)]), query={"labels": "agent"})
    fake_gh.route(ISSUES, fake_gh.reply(200, [issue(2), issue(3, pull_request={})]),
                  query={"labels": "bot"})
    (scope,) = make(fake_gh, labels=("agent", "bot")).list_items().scopes
    assert [i.ref.ref for i in scope.items] == ["o/r#1", "o/r#2", "o/r#3"]
    assert scope.items[2].kind == "pull_request"
    assert sorted(c["query"]["labels"] for c in fake_gh.calls()) == ["agent", "bot"]


def test_a_rate_limited_scope_is_degraded_with_its_reset_not_complete(fake_gh):
    fake_gh.route("repos/o/r/issues", fake_gh.reply(
        403, {"message": "API rate limit exceeded"},
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1900000000"}))
    fake_gh.route("repos/p/q/issues", fake_gh.reply(200, [issue(5)]))
    listing = make(fake_gh, repos=("o/r", "p/q")).list_items()
    by_scope = {s.scope: s for s in listing.scopes}
    assert by_scope["o/r"].status == "degraded" and by_scope["o/r"].items == ()
    assert by_scope["o/r"].reset_at == "2030-03-17T17:46:40Z"
    assert "2030-03-17T17:46:40Z" in by_scope["o/r"].reason
    # GitHub counts the limit per account: the next repository is not asked either.
    assert by_scope["p/q"].status == "degraded"
    assert by_scope["p/q"].reset_at == "2030-03-17T17:46:40Z"
    assert [c["path"] for c in fake_gh.calls()] == ["repos/o/r/issues"]
    assert listing.reconcilable  # degraded refs are skipped one by one


@pytest.mark.parametrize(
    ("reply_kw", "expect"),
    [
        ({"status": 401, "json_body": {"message": "Bad credentials"}}, "gh auth login"),
        ({"status": 404, "json_body": {"message": "Not Found"}}, "HTTP 404"),
        ({"status": 502, "json_body": {"message": "Bad Gateway"}}, "HTTP 502"),
        ({"status": 200, "json_body": {"message": "Moved"}}, "not a list of issues"),
        ({"status": 200, "json_body": [{"title": "no number"}]}, "not a list of issues"),
        ({"status": 200, "body": "<html>"}, "not JSON"),
        ({"raw": "", "exit": 1, "stderr": "dial tcp: i/o timeout"}, "no HTTP response"),
    ],
)
def test_a_listing_that_cannot_be_trusted_is_failed(fake_gh, reply_kw, expect):
    fake_gh.route(ISSUES, fake_gh.reply(**reply_kw))
    (scope,) = make(fake_gh).list_items().scopes
    assert scope.status == "failed" and scope.items == ()
    assert expect in scope.reason


def test_a_body_error_after_exit_0_is_not_complete(fake_gh):
    fake_gh.route(ISSUES, fake_gh.reply(422, {"message": "Validation Failed"}, exit=0))
    (scope,) = make(fake_gh).list_items().scopes
    assert scope.status == "failed" and "HTTP 422" in scope.reason


@pytest.mark.parametrize(
    ("body", "state", "reason"),
    [
        (issue(7, state="open"), "open", ""),
        (issue(7, state="closed", state_reason="not_planned"), "closed", "not_planned"),
        (issue(7, state="closed", state_reason="completed",
               pull_request={"merged_at": "2026-01-02T00:00:00Z"}), "merged", "completed"),
        (issue(7, state="closed", pull_request={"merged_at": None}), "closed", ""),
    ],
)
def test_closure_reads_state_reason_and_merged(fake_gh, body, state, reason):
    fake_gh.route("repos/o/r/issues/7", fake_gh.reply(200, body))
    closure = make(fake_gh).closure(WorkItemRef("o/r#7"))
    assert closure.state == state and closure.state_reason == reason


def test_closure_of_a_pull_request_without_merged_at_asks_the_pulls_endpoint(fake_gh):
    fake_gh.route("repos/o/r/issues/8", fake_gh.reply(
        200, issue(8, state="closed", pull_request={"url": "x"},
                   closed_by={"login": "octo"})))
    fake_gh.route("repos/o/r/pulls/8", fake_gh.reply(200, {"merged_at": "2026-01-02T00:00:00Z"}))
    closure = make(fake_gh).closure(WorkItemRef("o/r#8"))
    assert closure.state == "merged" and closure.closed_by == "octo"


def test_closure_of_a_missing_item_names_the_ref(fake_gh):
    with pytest.raises(ProviderError, match=r"o/r#404.*not found.*404"):
        make(fake_gh).closure(WorkItemRef("o/r#404"))


def test_closure_under_rate_limit_degrades_the_scope_with_reset(fake_gh):
    fake_gh.route("repos/o/r/issues/7", fake_gh.reply(429, {"message": "slow down"},
                                                      headers={"Retry-After": "60"}))
    with pytest.raises(ProviderError, match="rate limit") as info:
        make(fake_gh).closure(WorkItemRef("o/r#7"))
    assert info.value.degrades_scope and info.value.scope == "o/r" and info.value.reset_at


def test_closure_with_bad_credentials_says_run_gh_auth_login(fake_gh):
    fake_gh.route("repos/o/r/issues/7", fake_gh.reply(401, {"message": "Bad credentials"}))
    with pytest.raises(ProviderError, match="gh auth login"):
        make(fake_gh).closure(WorkItemRef("o/r#7"))


def test_closure_refuses_refs_of_other_repos_without_asking(fake_gh):
    with pytest.raises(ProviderError, match="configured"):
        make(fake_gh).closure(WorkItemRef("x/y#1"))
    assert fake_gh.calls() == []


@pytest.mark.parametrize(
    ("ref", "owned"),
    [("o/r#1", True), ("O/R#1", True), ("x/y#1", False), ("o/r#0", False), ("o/r", False),
     ("o/r#1/../../x", False), ("../o/r#1", False), ("o/..#1", False), ("o/r#-1", False)],
)
def test_owns_and_scope_of(fake_gh, ref, owned):
    provider = make(fake_gh, repos=("O/r",))
    assert provider.owns(WorkItemRef(ref)) is owned
    if owned:
        assert provider.scope_of(WorkItemRef(ref)) == "o/r"


@pytest.mark.parametrize("repo", ["no-slash", "a/b/c", "../x", "o/..", "", "o/r#1"])
def test_config_names_a_bad_repo(repo):
    with pytest.raises(ConfigError, match=r"\[plugins.gh\] repos\[0\]"):
        check_config(GhConfig(repos=[repo]), "hostcore.toml")


def test_availability_without_repos_or_without_gh(fake_gh, tmp_path):
    assert "repos" in (make(fake_gh, repos=()).availability() or "")
    missing = GhProvider(GhConfig(repos=["o/r"]),
                         GhRunner(executable="gh", env={"PATH": str(tmp_path)}))
    assert "not installed" in (missing.availability() or "")
    assert make(fake_gh).availability() is None
