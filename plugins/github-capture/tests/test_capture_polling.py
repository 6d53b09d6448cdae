"""Capture against a fake ``gh`` on PATH: ETags and 304s, poll intervals, paging, budgets,
rate limits, retirement and the ignore list."""

from __future__ import annotations

import msgspec
import pytest
import tenacity
from hostcore_gh.runner import GhRunner
from hostcore_github_capture.capture import (
    MAX_BACKOFF_SECONDS,
    MAX_EVENTS,
    NOT_FOUND_RETRY_SECONDS,
)

REMOTE = "git@github.com:{}.git"


def stored(host):
    """Event ids in the github_events partition, read back through the seam."""
    return [key for _, key in host.seam.read_rows_since_sync("github_events", 0, ["key"])]


@pytest.fixture
def capture(harness, fake_gh):
    def make(*repos, directory="/w/a", source="claude", **options):
        options.setdefault("runner", GhRunner(env=fake_gh.env, wait=tenacity.wait_none()))
        h = harness(**options)
        h.add("claude", [(directory, source, REMOTE.format(r)) for r in repos])
        return h

    return make


def polled(h):
    return h.events.named("capture.polled")[-1].attributes


def test_events_are_stored_once_and_an_unchanged_repository_answers_304(
        capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 5))
    h = capture("octo/a")
    assert h.host.tick().ok
    assert sorted(stored(h.host), key=int) == ["1", "2", "3", "4", "5"]
    clock.advance(61)
    h.host.tick()
    calls = fake_gh.calls()
    assert [c["status"] for c in calls] == [200, 304]
    assert calls[0]["if_none_match"] is None and calls[1]["if_none_match"]
    assert polled(h)["not_modified"] == 1 and polled(h)["events_stored"] == 0
    assert len(stored(h.host)) == 5


def test_new_events_are_fetched_down_to_the_newest_already_stored(
        capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 5))
    h = capture("octo/a")
    h.host.tick()
    fake_gh.push("octo/a", make_events("octo/a", 3, first_id=6))
    clock.advance(61)
    h.host.tick()
    assert polled(h)["events_stored"] == 3 and polled(h)["requests"] == 1
    assert len(stored(h.host)) == 8


def test_paging_stops_at_the_three_hundred_events_github_keeps(capture, fake_gh, make_events):
    fake_gh.repo("octo/busy", make_events("octo/busy", 450))
    h = capture("octo/busy")
    h.host.tick()
    pages = [c["query"].get("page", "1") for c in fake_gh.calls()]
    assert pages == ["1", "2", "3"]
    assert len(stored(h.host)) == MAX_EVENTS


def test_the_poll_interval_github_asks_for_is_honoured(capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 1), poll_interval=120)
    h = capture("octo/a")
    h.host.tick()
    clock.advance(100)
    h.host.tick()
    assert len(fake_gh.calls()) == 1
    clock.advance(21)
    h.host.tick()
    assert len(fake_gh.calls()) == 2


def test_the_request_budget_bounds_a_step_and_every_repository_gets_its_turn(
        capture, fake_gh, make_events, clock):
    repos = [f"octo/r{i}" for i in range(5)]
    for n, repo in enumerate(repos):
        fake_gh.repo(repo, make_events(repo, 1, first_id=100 + n))
    h = capture(*repos, request_budget=2)
    reports = [h.host.tick() for _ in range(3)]
    assert len(fake_gh.calls()) == 5
    assert fake_gh.polled_repos() == set(repos)
    assert [r.pending for r in reports] == [True, True, False]
    clock.advance(61)
    fake_gh.clear_calls()
    h.host.tick()
    # Least recently polled first: the two polled in the first tick come first again.
    assert [c["path"].split("/")[2] for c in fake_gh.calls()] == ["r0", "r1"]


def test_a_rate_limit_stops_requests_until_it_resets(capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 1))
    fake_gh.repo("octo/b", make_events("octo/b", 1, first_id=50))
    reset = int(clock.now) + 600
    fake_gh.rate_limit(reset)
    h = capture("octo/a", "octo/b")
    h.host.tick()
    assert len(fake_gh.calls()) == 1 and polled(h)["rate_limited"] is True
    clock.advance(300)
    h.host.tick()
    assert len(fake_gh.calls()) == 1
    fake_gh.rate_limit(None)
    clock.now = reset + 1
    h.host.tick()
    assert len(fake_gh.calls()) == 3
    assert len(stored(h.host)) == 2


def test_a_secondary_rate_limit_waits_for_retry_after(capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 1))
    fake_gh.rate_limit(int(clock.now) + 3600, retry_after=30)
    h = capture("octo/a")
    h.host.tick()
    fake_gh.rate_limit(None)
    clock.advance(20)
    h.host.tick()
    assert len(fake_gh.calls()) == 1
    clock.advance(11)
    h.host.tick()
    assert len(fake_gh.calls()) == 2


def test_a_retired_repository_stops_being_captured_at_the_next_step_and_its_rows_stay(
        capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/kept", make_events("octo/kept", 2))
    fake_gh.repo("octo/secret", make_events("octo/secret", 3, first_id=10))
    h = capture("octo/kept")
    h.add("claude", [("/w/secret", "claude", REMOTE.format("octo/secret"))])
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/kept", "octo/secret"}
    fake_gh.clear_calls()
    h.local_only("/w/secret")
    clock.advance(61)
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/kept"}
    assert len(stored(h.host)) == 5  # nothing retracted
    assert "octo/secret" not in h.worker.capturer.state.load().repos


def test_ignore_is_forward_only(capture, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 2))
    fake_gh.repo("octo/b", make_events("octo/b", 2, first_id=10))
    h = capture("octo/a", "octo/b")
    h.host.tick()
    sidecar = h.sidecar
    state = sidecar.state.load()
    sidecar.state.save(msgspec.structs.replace(state, ignore=["octo/b"]))
    fake_gh.clear_calls()
    clock.advance(61)
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/a"}
    assert polled(h)["ignored"] == 1
    assert len(stored(h.host)) == 4
    assert "octo/b" in h.inventory()


def test_capture_during_a_pass_polls_only_confirmed_repositories(
        capture, fake_gh, make_events, clock):
    repos = [f"octo/r{i}" for i in range(6)]
    for n, repo in enumerate(repos):
        fake_gh.repo(repo, make_events(repo, 1, first_id=100 + n))
    h = capture(*repos, row_budget=2, tuple_budget=2)
    h.run_pass()
    fake_gh.clear_calls()
    h.local_only("/elsewhere")
    clock.advance(61)
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/r0", "octo/r1"}


def test_a_missing_repository_is_counted_and_retried_much_later(capture, fake_gh, clock):
    h = capture("octo/deleted")
    h.host.tick()
    assert polled(h)["gone"] == 1
    clock.advance(NOT_FOUND_RETRY_SECONDS - 1)
    h.host.tick()
    assert len(fake_gh.calls()) == 1
    clock.advance(2)
    h.host.tick()
    assert len(fake_gh.calls()) == 2


def test_without_gh_the_inventory_still_revalidates_and_capture_says_unavailable(harness):
    h = harness(runner=GhRunner(env={"PATH": "/nonexistent"}, wait=tenacity.wait_none()))
    h.add("claude", [("/w", "claude", REMOTE.format("octo/a"))])
    report = h.host.tick()
    assert report.ok
    assert h.inventory() == {"octo/a"}
    assert polled(h)["unavailable"] is True


def test_a_repository_awaiting_reconfirmation_keeps_its_etag_for_a_304_afterwards(
        capture, fake_gh, make_events, clock):
    repos = [f"octo/r{i}" for i in range(4)]
    for n, repo in enumerate(repos):
        fake_gh.repo(repo, make_events(repo, 1, first_id=100 + n))
    h = capture(*repos, row_budget=2, tuple_budget=2)
    h.run_pass()
    h.host.tick()
    h.local_only("/elsewhere")
    clock.advance(61)
    h.host.tick()  # the pass confirmed r0, r1 only
    assert set(h.worker.capturer.state.load().repos) == set(repos)
    fake_gh.clear_calls()
    clock.advance(61)
    h.host.tick()  # the pass completes; every repository is polled again
    calls = fake_gh.calls()
    assert {c["path"] for c in calls} == {f"repos/{r}/events" for r in repos}
    assert all(c["status"] == 304 for c in calls)


def test_the_last_request_a_window_allows_is_used_and_then_capture_waits(capture, fake_gh,
                                                                         make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 2))
    fake_gh.repo("octo/b", make_events("octo/b", 2, first_id=10))
    fake_gh.data["remaining"] = 0  # every answer says the window is used up
    fake_gh.save()
    h = capture("octo/a", "octo/b")
    h.host.tick()
    assert len(fake_gh.calls()) == 1 and len(stored(h.host)) == 2
    assert polled(h)["rate_limited"] is True
    clock.advance(MAX_BACKOFF_SECONDS - 1)
    h.host.tick()
    assert len(fake_gh.calls()) == 1  # the fake's reset time is years ahead: wait the cap
    clock.advance(1)
    h.host.tick()
    assert len(fake_gh.calls()) == 2


def test_a_root_without_github_evidence_never_builds_the_capturer_or_its_state(harness):
    h = harness(runner=GhRunner(env={"PATH": "/nonexistent"}, wait=tenacity.wait_none()))
    report = h.host.tick()
    assert report.ok and report.count("github-capture", "requests") == 0
    assert "capturer" not in vars(h.worker), "the capture code stays unloaded"
    assert not h.worker.capture_state.path.exists()
    h.add("claude", [("/w", "claude", REMOTE.format("octo/a"))])
    h.host.tick()
    assert polled(h)["unavailable"] is True, "a repository in evidence is captured at once"
