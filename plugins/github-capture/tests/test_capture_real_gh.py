"""Capture through the real ``gh`` binary, talking to a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import pytest
import tenacity
from hostcore_gh.runner import GhRunner

from hostcore.testing import require_tool

REMOTE = "https://github.com/{}.git"


@pytest.fixture
def real_gh_capture(harness, fake_github):
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none(), timeout=20)

    def make(*repos):
        h = harness(runner=runner)
        h.add("claude", [("/w", "claude", REMOTE.format(r)) for r in repos])
        return h

    return make


def stored(host):
    return sorted((k for _, k in host.seam.read_rows_since_sync("github_events", 0, ["key"])),
                  key=int)


def test_real_gh_captures_then_gets_304_for_the_same_etag(real_gh_capture, fake_github,
                                                           make_events, clock):
    fake_github.repo("octo/tool", make_events("octo/tool", 3))
    h = real_gh_capture("octo/tool")
    assert h.host.tick().ok
    assert stored(h.host) == ["1", "2", "3"]
    clock.advance(61)
    h.host.tick()
    calls = fake_github.calls()
    assert [c["status"] for c in calls] == [200, 304]
    assert calls[0]["if_none_match"] is None
    assert calls[1]["if_none_match"].startswith('W/"')  # the ETag the first answer sent
    assert h.events.named("capture.polled")[-1].attributes["not_modified"] == 1
    assert stored(h.host) == ["1", "2", "3"]


def test_real_gh_pages_and_stores_new_events_only(real_gh_capture, fake_github, make_events,
                                                  clock):
    fake_github.repo("octo/busy", make_events("octo/busy", 150))
    h = real_gh_capture("octo/busy")
    h.host.tick()
    assert [c["query"].get("page", "1") for c in fake_github.calls()] == ["1", "2"]
    assert len(stored(h.host)) == 150
    fake_github.push("octo/busy", make_events("octo/busy", 2, first_id=151))
    clock.advance(61)
    h.host.tick()
    assert len(stored(h.host)) == 152
    assert len(fake_github.calls()) == 3


def test_real_gh_rate_limit_backs_off_until_reset(real_gh_capture, fake_github, make_events,
                                                  clock):
    fake_github.repo("octo/tool", make_events("octo/tool", 1))
    reset = int(clock.now) + 900
    fake_github.rate_limit(reset)
    h = real_gh_capture("octo/tool")
    h.host.tick()
    assert h.events.named("capture.polled")[-1].attributes["rate_limited"] is True
    fake_github.rate_limit(None)
    clock.advance(899)
    h.host.tick()
    assert len(fake_github.calls()) == 1
    clock.advance(2)
    h.host.tick()
    assert stored(h.host) == ["1"]
