"""Reconciliation under the faults real deployments meet, through the real ``gh`` binary
against the fake GitHub: one bad repository, a hung GitHub, redirects (renames and
transfers), secondary rate limits, issue numbers of any size."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import hostcore_gh.plugin as gh_plugin
import pytest
import tenacity
from hostcore_gh.provider import MAX_ISSUE_NUMBER, GhConfig, GhProvider
from hostcore_gh.runner import GhRunner

from hostcore.plugin.markers import hookimpl
from hostcore.testing import require_tool
from hostcore.workitems.items import WorkItemRef
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import Poller

API_HOST = "http://api.github.localhost"  # where gh sends GH_HOST=github.localhost's API
LONG_AGO = "2020-01-01T00:00:00Z"
CHANGED = "2026-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _real_gh() -> None:
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")


def listing_path(repo: str, page: int = 1, labels: str | None = None) -> str:
    params = {"state": "open", "per_page": "100", "sort": "updated", "direction": "desc"}
    if labels is not None:
        params["labels"] = labels
    params["page"] = str(page)
    return f"/repos/{repo}/issues?{urlencode(params)}"


def issue(repo: str, number: int, state: str = "open", updated: str = CHANGED,
          **extra: Any) -> dict[str, Any]:
    return {"number": number, "state": state, "updated_at": updated, "title": f"t{number}",
            "repository_url": f"{API_HOST}/repos/{repo}",
            "html_url": f"https://github.localhost/{repo}/issues/{number}", **extra}


def polled(ref: str, *, session: bool = False, updated: str = CHANGED) -> PortableRecord:
    """A record the poller once listed (announced long ago), tracked with ``session``."""
    return PortableRecord(ref=ref, session={"id": "s"} if session else None,
                          poll=PollSection(last_polled_at=LONG_AGO, announced_at=LONG_AGO,
                                           updated_at=updated))


def make_root(tmp_path: Path, repos: list[str], extra: str = "") -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "hostcore.toml").write_text(
        f"{extra}[plugins.gh]\nrepos = {json.dumps(repos)}\n")
    return root


def plant(root: Path, *records: PortableRecord) -> None:
    ledger = Ledger(root / "ledger")
    for record in records:
        ledger.write(record)
    ledger.close()


class Receiver:
    __name__ = "receiver"

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    @hookimpl
    def hostcore_work_item_event(self, event: Any) -> None:
        moved_to = event.closure.moved_to if event.closure is not None else ""
        self.events.append((event.kind, event.ref.ref, moved_to))


# -- one bad repository ---------------------------------------------------------------

def test_one_failing_repository_pauses_only_its_own_records(hostcore_cli, register_plugin,
                                                            fake_github, tmp_path):
    register_plugin(gh_plugin)
    root = make_root(tmp_path, ["acme/widgets", "acme/gone"])
    plant(root, polled("acme/widgets#2", session=True), polled("acme/widgets#3"),
          polled("acme/gone#5", session=True), polled("acme/gone#6"))
    gone = {ref: (Ledger(root / "ledger").path_for(ref).read_bytes())
            for ref in ("acme/gone#5", "acme/gone#6")}
    fake_github.route("/repos/acme/widgets/issues", 200, [issue("acme/widgets", 1)])
    fake_github.fail_repo("acme/gone", 404)
    fake_github.route("/repos/acme/widgets/issues/2", 200,
                      issue("acme/widgets", 2, "closed", state_reason="completed"))
    fake_github.route("/repos/acme/widgets/issues/3", 200,
                      issue("acme/widgets", 3, "closed", state_reason="not_planned"))

    result = hostcore_cli("poll", "--once", "--json", env=fake_github.env(), root=root)

    assert result.exit_code == 1
    assert "acme/gone (failed)" in result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["unlisted"] == {"acme/gone": "failed"}
    assert (summary["tracked_checks"], summary["ledger_checks"]) == (1, 1)
    assert summary["closures"] == 2 and summary["paused"] == 2
    ledger = Ledger(root / "ledger")
    assert ledger.read("acme/widgets#2").ended.state_reason == "completed"
    assert ledger.read("acme/widgets#3").ended.state_reason == "not_planned"
    for ref, before in gone.items():  # paused: not asked, not written
        assert ledger.path_for(ref).read_bytes() == before
    assert not [p for p in fake_github.paths() if p.startswith("/repos/acme/gone/issues/")]


def test_an_interrupted_repository_reconciles_what_its_listing_proves(fake_github, tmp_path):
    # More open items than the page budget: listed most recently changed first, so the
    # two pages prove absence for everything changed after the last item they reached.
    for page, day in ((1, "10"), (2, "08")):
        link = f'<{API_HOST}/repositories/1/issues?page={page + 1}>; rel="next"'
        fake_github.route(listing_path("big/repo", page), 200,
                          [issue("big/repo", 100 + page, updated=f"2026-03-{day}T00:00:00Z")],
                          {"Link": link})
    fake_github.route("/repos/big/repo/issues/7", 200, issue("big/repo", 7, "closed"))
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(polled("big/repo#7", updated="2026-03-09T00:00:00Z"))
    ledger.write(polled("big/repo#8", session=True, updated="2026-02-01T00:00:00Z"))
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["big/repo"]), runner, max_pages=2)
    poller = Poller(ledger, [provider], dispatch=lambda event: 0,
                    emit=lambda *a, **k: None, interval=lambda: 60.0)

    (summary,) = poller.cycle()

    assert summary.unlisted == {"big/repo": "interrupted"}
    assert summary.ledger_checks == 1 and summary.closures == 1 and summary.paused == 1
    assert ledger.read("big/repo#7").ended is not None
    assert ledger.read("big/repo#8").ended is None
    assert "/repos/big/repo/issues/8" not in fake_github.paths()
    assert any("records last changed after 2026-03-08T00:00:00Z are reconciled" in e
               for e in summary.errors)


# -- cron sees failure ---------------------------------------------------------------

@pytest.mark.parametrize("fault", ["bad_credentials", "server_error", "malformed_json",
                                   "not_logged_in"])
def test_poll_once_exits_1_naming_the_scope_that_could_not_be_listed(
        hostcore_cli, register_plugin, fake_github, tmp_path, fault):
    register_plugin(gh_plugin)
    root = make_root(tmp_path, ["o/r"])
    env = fake_github.env()
    if fault == "bad_credentials":
        fake_github.fail_repo("o/r", 401, "Bad credentials")
    elif fault == "server_error":
        fake_github.fail_repo("o/r", 500)
    elif fault == "malformed_json":
        fake_github.route("/repos/o/r/issues", 200, b"[{\"number\": 1,")
    else:
        del env["GH_TOKEN"]  # and GH_CONFIG_DIR is empty: gh asks for `gh auth login`
    result = hostcore_cli("poll", "--once", env=env, root=root)
    assert result.exit_code == 1, result.stderr
    assert "not everything was polled: gh: o/r (failed)" in result.stderr
    assert "Traceback" not in result.stderr


def test_poll_once_exits_0_when_the_provider_is_only_unconfigured(hostcore_cli,
                                                                  register_plugin, tmp_path):
    register_plugin(gh_plugin)
    result = hostcore_cli("poll", "--once", "--json", root=tmp_path / "root")
    assert result.exit_code == 0, result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["available"] is False and summary["configured"] is False
    assert "no repository to poll" in summary["errors"][0]


# -- a hung GitHub -------------------------------------------------------------------

def test_a_hung_github_costs_at_most_the_cycle_budget(hostcore_cli, register_plugin,
                                                       fake_github, tmp_path):
    register_plugin(gh_plugin)
    budget = 2.0
    root = make_root(tmp_path, ["o/a", "o/b", "o/c"],
                     extra=f"[poll]\ncycle_budget_seconds = {budget}\n")
    plant(root, *(polled(f"o/{name}#1", session=True) for name in "abc"))
    fake_github.hang()
    started = time.monotonic()
    result = hostcore_cli("poll", "--once", "--json", env=fake_github.env(), root=root)
    elapsed = time.monotonic() - started
    assert elapsed < budget + 2, elapsed
    assert result.exit_code == 1
    (summary,) = json.loads(result.stdout)
    assert summary["unlisted"] == {"o/a": "interrupted", "o/b": "interrupted",
                                   "o/c": "interrupted"}
    assert "time budget" in " ".join(summary["errors"])
    assert summary["tracked_checks"] == 0 and summary["paused"] == 3
    assert len(fake_github.requests) == 1  # nothing was asked once the budget was spent


def test_a_question_without_an_answer_degrades_its_scope_for_the_rest_of_the_cycle(
        fake_github, tmp_path):
    fake_github.route("/repos/o/r/issues", 200, [])
    fake_github.hang("/repos/o/r/issues/1")
    fake_github.route("/repos/p/q/issues", 200, [])
    fake_github.route("/repos/p/q/issues/3", 200, issue("p/q", 3, "closed"))
    ledger = Ledger(tmp_path / "ledger")
    for ref in ("o/r#1", "o/r#2", "p/q#3"):
        ledger.write(polled(ref, session=True))
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["o/r", "p/q"]), runner, question_deadline=1.0)
    poller = Poller(ledger, [provider], dispatch=lambda event: 0,
                    emit=lambda *a, **k: None, interval=lambda: 60.0)
    started = time.monotonic()
    (summary,) = poller.cycle()
    assert time.monotonic() - started < 5
    assert "/repos/o/r/issues/2" not in fake_github.paths()  # o/r degraded after #1
    assert summary.tracked_checks == 2 and summary.paused == 1
    assert ledger.read("p/q#3").ended is not None  # the other scope goes on


# -- redirects: renames and transfers --------------------------------------------------

def test_a_renamed_repository_moves_its_records_and_announces_nothing_twice(
        make_host, fake_github):
    receiver = Receiver()
    host = make_host(gh_plugin, receiver, config={"plugins": {"gh": {"repos": ["acme/new"]}}},
                     env=fake_github.env())
    for number in (1, 2):
        host.ledger.write(polled(f"acme/old#{number}"))
    fake_github.redirect("/repos/acme/old", "/repositories/9")
    fake_github.route("/repositories/9", 200, {"id": 9, "full_name": "acme/new"})
    fake_github.route("/repos/acme/new/issues",
                      200, [issue("acme/new", n) for n in (1, 2, 3)])

    (summary,) = host.poller.cycle()
    host.poller.cycle()

    assert sorted(receiver.events) == [
        ("moved", "acme/old#1", "acme/new#1"), ("moved", "acme/old#2", "acme/new#2"),
        ("opened", "acme/new#3", "")]
    assert summary.moved == 2 and summary.new == 1
    old = host.ledger.read("acme/old#1")
    assert old.poll is None and old.ended.state == "moved"
    assert old.ended.moved_to == "acme/new#1"
    new = host.ledger.read("acme/new#1")
    assert new.poll.announced_at == LONG_AGO and new.ended is None
    assert fake_github.paths().count("/repos/acme/old") == 1


def test_a_renamed_repository_with_nothing_open_under_its_new_name_still_moves_its_records(
        make_host, fake_github):
    receiver = Receiver()
    host = make_host(gh_plugin, receiver, config={"plugins": {"gh": {"repos": ["acme/new"]}}},
                     env=fake_github.env())
    host.ledger.write(polled("acme/old#1"))
    fake_github.redirect("/repos/acme/old", "/repositories/9")
    fake_github.route("/repositories/9", 200, {"id": 9, "full_name": "acme/new"})
    fake_github.route("/repos/acme/new/issues", 200, [])

    (summary,) = host.poller.cycle()

    assert summary.moved == 1
    assert host.ledger.read("acme/old#1").ended.moved_to == "acme/new#1"
    assert receiver.events == [("moved", "acme/old#1", "acme/new#1")]


def test_a_repository_dropped_from_the_config_is_asked_about_once_a_window(
        make_host, fake_github):
    host = make_host(gh_plugin, config={"plugins": {"gh": {"repos": ["acme/kept"]}}},
                     env=fake_github.env())
    host.ledger.write(polled("acme/dropped#1"))
    fake_github.route("/repos/acme/dropped", 200, {"id": 5, "full_name": "acme/dropped"})
    fake_github.route("/repos/acme/kept/issues", 200, [])

    for _ in range(3):
        host.poller.cycle()

    assert fake_github.paths().count("/repos/acme/dropped") == 1
    record = host.ledger.read("acme/dropped#1")
    assert record.ended is None and record.poll.closure_checked_at  # asked, kept open


def test_a_transferred_item_is_recorded_as_moved_not_closed_or_open(make_host, fake_github):
    receiver = Receiver()
    host = make_host(gh_plugin, receiver, config={"plugins": {"gh": {"repos": ["o/r"]}}},
                     env=fake_github.env())
    host.ledger.write(polled("o/r#5", session=True))
    fake_github.route("/repos/o/r/issues", 200, [])
    fake_github.redirect("/repos/o/r/issues/5", "/repositories/7/issues/12")
    fake_github.route("/repositories/7/issues/12", 200, issue("p/q", 12, "closed"))

    (summary,) = host.poller.cycle()

    record = host.ledger.read("o/r#5")
    assert record.ended.state == "moved" and record.ended.moved_to == "p/q#12"
    assert record.poll is None
    assert summary.moved == 1 and summary.closures == 0
    assert receiver.events == [("moved", "o/r#5", "p/q#12")]
    assert host.ledger.read("p/q#12") is None  # not a repository this host polls


def test_an_item_transferred_into_a_polled_repository_keeps_its_session(make_host,
                                                                         fake_github):
    host = make_host(gh_plugin, config={"plugins": {"gh": {"repos": ["o/r", "p/q"]}}},
                     env=fake_github.env())
    host.ledger.write(polled("o/r#5", session=True))
    fake_github.route("/repos/o/r/issues", 200, [])
    fake_github.route("/repos/p/q/issues", 200, [issue("p/q", 12)])
    fake_github.redirect("/repos/o/r/issues/5", "/repositories/7/issues/12")
    fake_github.route("/repositories/7/issues/12", 200, issue("p/q", 12))
    host.poller.cycle()
    assert host.ledger.read("o/r#5").ended.moved_to == "p/q#12"
    moved = host.ledger.read("p/q#12")
    assert moved.session == {"id": "s"} and moved.poll is not None


def test_an_answer_about_another_number_of_the_same_repository_is_no_answer(fake_github,
                                                                              tmp_path):
    fake_github.route("/repos/o/r/issues/5", 200, issue("o/r", 6, "closed"))
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["o/r"]), runner)
    from hostcore.workitems.items import ProviderError
    with pytest.raises(ProviderError, match="about #6, not #5"):
        provider.closure(WorkItemRef("o/r#5"))


# -- numbers ----------------------------------------------------------------------

def test_a_number_of_more_than_ten_digits_is_listed_and_can_be_checked(fake_github):
    big = 12345678901
    fake_github.route("/repos/o/r/issues", 200, [issue("o/r", big)])
    fake_github.route(f"/repos/o/r/issues/{big}", 200, issue("o/r", big, "closed"))
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["o/r"]), runner)
    (scope,) = provider.list_items().scopes
    (item,) = scope.items
    assert scope.status == "complete" and item.ref.ref == f"o/r#{big}"
    assert provider.owns(item.ref) and provider.scope_of(item.ref) == "o/r"
    assert provider.closure(item.ref).state == "closed"


def test_a_number_no_ref_can_carry_is_refused_when_listed_and_when_asked(fake_github):
    too_big = MAX_ISSUE_NUMBER + 1
    fake_github.route("/repos/o/r/issues", 200, [issue("o/r", too_big)])
    runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
    provider = GhProvider(GhConfig(repos=["o/r"]), runner)
    (scope,) = provider.list_items().scopes
    assert scope.status == "failed" and "not a list of issues" in scope.reason
    assert not provider.owns(WorkItemRef(f"o/r#{too_big}"))


# -- rate limits ---------------------------------------------------------------------

def test_a_secondary_rate_limit_degrades_and_nothing_is_asked_until_a_minute_passed(
        fake_github, tmp_path):
    from datetime import UTC, datetime, timedelta
    now = [datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)]
    fake_github.secondary_rate_limit("/repos/o/a/issues")
    fake_github.route("/repos/o/b/issues", 200, [])

    def provider() -> GhProvider:  # a new process each time, as cron runs poll --once
        runner = GhRunner(env=fake_github.env(), wait=tenacity.wait_none())
        return GhProvider(GhConfig(repos=["o/a", "o/b"]), runner, state_dir=tmp_path / "gh",
                          clock=lambda: now[0])

    listing = provider().list_items()
    statuses = {s.scope: (s.status, s.reset_at) for s in listing.scopes}
    assert statuses == {"o/a": ("degraded", "2026-06-01T12:01:00Z"),
                        "o/b": ("degraded", "2026-06-01T12:01:00Z")}
    assert "credentials" not in listing.scopes[0].reason
    assert fake_github.paths() == ["/repos/o/a/issues"]

    now[0] += timedelta(seconds=59)
    later = provider()
    assert {s.status for s in later.list_items().scopes} == {"degraded"}
    assert len(fake_github.requests) == 1  # the wait is kept across processes
    assert later.status()["rate_limited_until"] == "2026-06-01T12:01:00Z"

    now[0] += timedelta(seconds=2)
    fake_github.routes.pop("/repos/o/a/issues")
    fake_github.route("/repos/o/a/issues", 200, [])
    assert {s.status for s in provider().list_items().scopes} == {"complete"}


# -- stop signals ----------------------------------------------------------------------

def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize(("args", "status"), [(["poll", "--once"], 1), (["poll"], 0),
                                             (["run", "--once"], None), (["run"], None)])
def test_sigterm_ends_a_hung_poll_within_two_seconds_and_kills_gh(fake_github, tmp_path,
                                                                  args, status):
    root = make_root(tmp_path, ["o/r"])
    fake_github.hang()
    env = {**os.environ, **fake_github.env(), "HOSTCORE_ROOT": str(root),
           "HOSTCORE_LOAD_PLUGINS": "hostcore-gh"}
    proc = subprocess.Popen([sys.executable, "-m", "hostcore", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not fake_github.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_github.requests, "gh never reached the fake GitHub"
        (gh,) = children_of(proc.pid)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code = proc.wait(timeout=10)
        assert time.monotonic() - sent < 2
        # `run` reports the cut cycle as its poll step saw it; `poll` as documented.
        assert code == status if status is not None else code in (0, 1)
        assert not Path(f"/proc/{gh}").exists()  # killed and reaped, not orphaned
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
