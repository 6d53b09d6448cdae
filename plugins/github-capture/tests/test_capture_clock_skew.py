"""A time in the plugin's state that lies in the future was written by a wrong clock:
it counts as due, never as recent, and the events count it."""

from __future__ import annotations

import msgspec
import pytest
import tenacity
from hostcore_gh.runner import GhRunner
from hostcore_github_capture.capture import LONGEST_POLL_DELAY, MAX_BACKOFF_SECONDS
from hostcore_github_capture.stamps import FUTURE_TOLERANCE
from hostcore_github_capture.state import CaptureState, RepoPoll

REMOTE = "git@github.com:{}.git"
MONTH = 30 * 86400.0


def future_stamps(h):
    return [(e.attributes["field"], e.attributes["count"])
            for e in h.events.named("capture.future_stamps")]


@pytest.fixture
def derived(harness):
    h = harness()
    h.add("claude", [("/w", "claude", REMOTE.format("octo/a"))])
    h.run_pass()
    h.events.clear()
    return h


def stamp(h, **fields):
    h.sidecar.state.save(msgspec.structs.replace(h.state(), **fields))


def test_a_derivation_stamped_a_month_ahead_makes_the_age_backstop_due_now(derived, clock):
    stamp(derived, derived_at=clock.now + MONTH)
    outcome = derived.sidecar.tick()
    assert outcome.started == "age" and outcome.swapped
    assert future_stamps(derived) == [("derived_at", 1)]
    assert derived.state().derived_at == clock.now
    # Put right: the next week is quiet again.
    clock.advance(3600)
    assert derived.sidecar.tick().started is None


def test_a_derivation_a_little_ahead_within_the_tolerance_is_trusted(derived, clock):
    stamp(derived, derived_at=clock.now + FUTURE_TOLERANCE.total_seconds())
    assert derived.sidecar.tick().started is None
    assert not derived.sidecar.pending()
    assert future_stamps(derived) == []


def test_a_derivation_ahead_is_due_whatever_the_age_would_say(derived, clock):
    # Just past the tolerance: far from seven days old, and still due.
    stamp(derived, derived_at=clock.now + FUTURE_TOLERANCE.total_seconds() + 1)
    assert derived.sidecar.pending()
    assert derived.sidecar.tick().started == "age"


@pytest.fixture
def capturing(harness, fake_gh, make_events):
    def make(*repos, **options):
        for n, repo in enumerate(repos):
            fake_gh.repo(repo, make_events(repo, 1, first_id=10 * n + 1))
        h = harness(runner=GhRunner(env=fake_gh.env, wait=tenacity.wait_none()), **options)
        h.add("claude", [("/w", "claude", REMOTE.format(r)) for r in repos])
        h.host.tick()
        fake_gh.clear_calls()
        h.events.clear()
        return h

    return make


def save_capture(h, **repos):
    state = h.worker.capturer.state
    state.save(msgspec.structs.replace(state.load(), **repos))


def test_a_repository_scheduled_beyond_any_delay_the_plugin_sets_is_polled_now(
        capturing, fake_gh, clock):
    h = capturing("octo/a")
    polls = h.worker.capturer.state.load().repos
    skewed = msgspec.structs.replace(polls["octo/a"], poll_after=clock.now + MONTH)
    save_capture(h, repos={"octo/a": skewed})
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/a"}
    assert ("poll_after", 1) in future_stamps(h)
    assert h.worker.capturer.state.load().repos["octo/a"].poll_after < clock.now + MONTH


def test_a_repository_scheduled_within_the_longest_delay_waits(capturing, fake_gh, clock):
    h = capturing("octo/a")
    polls = h.worker.capturer.state.load().repos
    later = msgspec.structs.replace(polls["octo/a"], poll_after=clock.now + LONGEST_POLL_DELAY)
    save_capture(h, repos={"octo/a": later})
    h.host.tick()
    assert fake_gh.polled_repos() == set()
    assert future_stamps(h) == []


def test_a_repository_last_polled_in_the_future_is_not_sent_to_the_back(
        capturing, fake_gh, clock):
    h = capturing("octo/a", "octo/b", request_budget=1)
    save_capture(h, repos={
        "octo/a": RepoPoll(polled_at=clock.now + MONTH),  # a wrong clock's "just polled"
        "octo/b": RepoPoll(polled_at=clock.now - 3600)})
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/a"}
    assert ("polled_at", 1) in future_stamps(h)


def test_a_backoff_stamped_beyond_any_rate_limit_window_is_over(capturing, fake_gh, clock):
    h = capturing("octo/a")
    clock.advance(61)
    save_capture(h, backoff_until=clock.now + MONTH)
    h.host.tick()
    assert fake_gh.polled_repos() == {"octo/a"}
    assert ("backoff_until", 1) in future_stamps(h)
    assert h.worker.capturer.state.load().backoff_until == 0.0


def test_a_backoff_within_the_rate_limit_window_is_honoured(capturing, fake_gh, clock):
    h = capturing("octo/a")
    clock.advance(61)
    save_capture(h, backoff_until=clock.now + MAX_BACKOFF_SECONDS)
    h.host.tick()
    assert fake_gh.polled_repos() == set()
    assert h.events.named("capture.polled")[-1].attributes["rate_limited"] is True


def test_capture_state_times_are_only_written_within_the_delays_they_are_checked_against(
        capturing, fake_gh, clock):
    h = capturing("octo/a")
    fake_gh.data["repos"]["octo/a"]["poll_interval"] = 10 * 86400  # a header of ten days
    fake_gh.save()
    clock.advance(61)
    save_capture(h, repos={"octo/a": RepoPoll()})
    h.host.tick()
    state: CaptureState = h.worker.capturer.state.load()
    assert state.repos["octo/a"].poll_after <= clock.now + LONGEST_POLL_DELAY
