"""The smaller defects of issue 25, each through the real ``gh`` against the fake GitHub:
a repository too big to list whole, a rate-limited listing, a page that fails after
one that came back, and a stale index row naming a record already ended."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import hostcore_gh.plugin as gh_plugin
import pytest
import tenacity
from hostcore_gh.provider import LISTING_MAX_PAGES, PER_PAGE, GhConfig, GhProvider
from hostcore_gh.runner import GhRunner

from hostcore.testing import require_tool
from hostcore.workitems.items import WorkItemEvent
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import Poller

API_HOST = "http://api.github.localhost"
CHANGED = "2026-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _real_gh() -> None:
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")


def listing_path(repo: str, page: int) -> str:
    params = {"state": "open", "per_page": str(PER_PAGE), "sort": "updated",
              "direction": "desc", "page": str(page)}
    return f"/repos/{repo}/issues?{urlencode(params)}"


def next_link(page: int) -> dict[str, str]:
    return {"Link": f'<{API_HOST}/repositories/1/issues?page={page + 1}>; rel="next"'}


def issue(repo: str, number: int, state: str = "open", updated: str = CHANGED,
          **extra: Any) -> dict[str, Any]:
    return {"number": number, "state": state, "updated_at": updated, "title": f"t{number}",
            "repository_url": f"{API_HOST}/repos/{repo}",
            "html_url": f"https://github.localhost/{repo}/issues/{number}", **extra}


def make_root(tmp_path: Path, repos: list[str]) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "hostcore.toml").write_text(f"[plugins.gh]\nrepos = {json.dumps(repos)}\n")
    return root


def poller_for(ledger: Ledger, fake_github: Any, repos: list[str],
               events: list[WorkItemEvent]) -> Poller:
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=repos), runner)
    return Poller(ledger, [provider], dispatch=lambda event: events.append(event) or 0,
                  emit=lambda *a, **k: None, interval=lambda: 60.0)


def test_a_repository_too_big_for_the_page_budget_does_not_fail_poll_once(
        hostcore_cli, register_plugin, fake_github, tmp_path):
    # More than LISTING_MAX_PAGES pages of open items (5,000 at 100 a page): the page
    # budget is a bound by design, met every cycle; exit 1 for it would be for ever.
    register_plugin(gh_plugin)
    root = make_root(tmp_path, ["big/repo", "small/repo"])
    for page in range(1, LISTING_MAX_PAGES + 1):
        day = f"2026-03-{1 + (LISTING_MAX_PAGES - page) // 2:02d}T00:00:00Z"
        fake_github.route(listing_path("big/repo", page), 200,
                          [issue("big/repo", 1000 + page, updated=day)], next_link(page))
    fake_github.route("/repos/small/repo/issues", 200, [issue("small/repo", 1)])

    result = hostcore_cli("poll", "--once", "--json", env=fake_github.env(), root=root)

    assert result.exit_code == 0, result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["unlisted"] == {"big/repo": "interrupted"}
    assert summary["capped"] == ["big/repo"]
    assert summary["new"] == LISTING_MAX_PAGES + 1
    assert f"stopped after {LISTING_MAX_PAGES} pages" in " ".join(summary["errors"])


def test_an_interruption_by_the_time_budget_still_fails_poll_once(fake_github, tmp_path):
    # Only the page budget is a cap: a listing cut by time is not capped.
    ledger = Ledger(tmp_path / "ledger")
    events: list[WorkItemEvent] = []
    fake_github.hang("/repos/o/r/issues")
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["o/r"]), runner)
    poller = Poller(ledger, [provider], dispatch=lambda event: events.append(event) or 0,
                    emit=lambda *a, **k: None, interval=lambda: 60.0, budget=lambda: 1.0)
    (summary,) = poller.cycle()
    assert summary.unlisted == {"o/r": "interrupted"} and summary.capped == []
    assert summary.failures() == ["o/r (interrupted)"]


def test_a_rate_limited_listing_is_partial_and_fails_poll_once(hostcore_cli, register_plugin,
                                                                fake_github, tmp_path):
    register_plugin(gh_plugin)
    root = make_root(tmp_path, ["o/r"])
    fake_github.secondary_rate_limit("/repos/o/r/issues")

    result = hostcore_cli("poll", "--once", "--json", env=fake_github.env(), root=root)

    assert result.exit_code == 1
    assert "not everything was polled: gh: o/r (degraded)" in result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["listing"] == "partial" and summary["listed"] == 0
    assert summary["unlisted"] == {"o/r": "degraded"}


def test_a_page_that_fails_after_the_first_keeps_the_first_pages_items(fake_github,
                                                                          tmp_path):
    fake_github.route(listing_path("o/r", 1), 200, [issue("o/r", n) for n in (3, 2)],
                      next_link(1))
    fake_github.route(listing_path("o/r", 2), 500, {"message": "Server Error"})
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#1", session={"id": "s"},
                                poll=PollSection(last_polled_at=CHANGED)))
    events: list[WorkItemEvent] = []
    poller = poller_for(ledger, fake_github, ["o/r"], events)

    (summary,) = poller.cycle()

    assert sorted(e.ref.ref for e in events if e.kind == "opened") == ["o/r#2", "o/r#3"]
    assert summary.new == 2 and summary.unlisted == {"o/r": "failed"}
    assert summary.failures() == ["o/r (failed)"]
    # A failed scope proves no absence: the record missing from page 1 is not asked.
    assert summary.paused == 1 and "/repos/o/r/issues/1" not in fake_github.paths()


def test_a_stale_index_row_does_not_stamp_an_ended_record_again(fake_github, tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#1", session={"id": "s"},
                                poll=PollSection(last_polled_at=CHANGED)))
    assert [e.ref for e in ledger.tracked()] == ["o/r#1"]
    # Another writer ended it in place: the folder's mtime did not move, so the index
    # still calls the record tracked.
    path = ledger.path_for("o/r#1")
    before = os.stat(path.parent)
    ended = {"ref": "o/r#1", "session": {"id": "s"},
             "ended": {"at": "2026-05-01T00:00:00Z", "state": "closed"}}
    with path.open("r+b") as f:
        f.truncate(0)
        f.write(json.dumps(ended).encode())
    os.utime(path.parent, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [e.ref for e in ledger.tracked()] == ["o/r#1"]  # the stale row
    fake_github.route("/repos/o/r/issues", 200, [])
    fake_github.route("/repos/o/r/issues/1", 200,
                      issue("o/r", 1, "closed", state_reason="completed"))
    events: list[WorkItemEvent] = []

    (summary,) = poller_for(ledger, fake_github, ["o/r"], events).cycle()

    assert "/repos/o/r/issues/1" not in fake_github.paths()
    assert summary.tracked_checks == 0 and summary.closures == 0 and events == []
    assert ledger.read("o/r#1").ended.at == "2026-05-01T00:00:00Z"
