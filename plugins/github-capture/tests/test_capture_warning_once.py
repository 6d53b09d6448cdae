"""The "gh cannot run" warning is said once per state change, not once per tick: a
user who never set gh up is told once, across processes, and told again only after
gh worked in between."""

from __future__ import annotations

import logging

import tenacity
from hostcore_gh.runner import GhRunner

REMOTE = "https://github.com/{}.git"
STOPPED = "capture stopped: gh cannot run or is not logged in"
RESUMED = "capture resumed"


def said(caplog, text):
    return sum(text in record.getMessage() for record in caplog.records
               if record.levelno >= logging.WARNING)


def test_the_gh_warning_is_said_once_across_ticks_and_processes(harness, caplog, tmp_path):
    without_gh = GhRunner(env={"PATH": "/nonexistent"}, wait=tenacity.wait_none())
    h = harness(runner=without_gh)
    h.add("claude", [("/w", "claude", REMOTE.format("octo/a"))])
    root = h.host.root
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert h.host.tick().ok
        h.host.close()
        again = harness(root=root, runner=without_gh)  # a later `run --once`
        assert again.host.tick().ok
    assert said(caplog, STOPPED) == 1
    assert again.worker.capture_state.load().gh_unavailable is True


def test_the_warning_is_said_again_after_gh_worked_in_between(harness, fake_gh, make_events,
                                                               caplog, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 1))
    without_gh = GhRunner(env={"PATH": "/nonexistent"}, wait=tenacity.wait_none())
    h = harness(runner=without_gh)
    h.add("claude", [("/w", "claude", REMOTE.format("octo/a"))])
    root = h.host.root
    with caplog.at_level(logging.WARNING):
        h.host.tick()
        h.host.close()
        working = harness(root=root, runner=GhRunner(env=fake_gh.env,
                                                     wait=tenacity.wait_none()))
        working.host.tick()
        working.host.close()
        clock.advance(3600)  # the repository is due again
        broken = harness(root=root, runner=without_gh)
        broken.host.tick()
        broken.host.tick()
    assert said(caplog, STOPPED) == 2
    assert said(caplog, RESUMED) == 1
