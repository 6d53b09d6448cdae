"""One item GitHub will not answer about costs only that item: through the real ``gh``
against the fake GitHub, each fault on one record (or one stranded repository) while
the others are healthy, over several cycles with the poller's clock moved.

Every healthy item is announced or stamped on schedule; the failing question is asked
again only on the backoff written on its record; the cycle counts as failed
(``failures()``, what ``hostcore poll --once`` exits 1 on) while the failure stands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import hostcore_gh.plugin as gh_plugin
import pytest
import tenacity
from hostcore_gh.provider import GhConfig, GhProvider
from hostcore_gh.runner import GhRunner

from hostcore.testing import require_tool
from hostcore.timestamps import format_utc
from hostcore.workitems.items import WorkItemEvent
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import LEDGER_RECHECK_EVERY_CYCLES, Poller, PollSummary

API_HOST = "http://api.github.localhost"
T0 = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
LONG_AGO = "2020-01-01T00:00:00Z"
CHANGED = "2026-01-01T00:00:00Z"
INTERVAL = 60.0
WINDOW = timedelta(seconds=LEDGER_RECHECK_EVERY_CYCLES * INTERVAL)
SAML = ("Resource protected by organization SAML enforcement. You must grant your "
        "Personal Access token access to this organization.")


@pytest.fixture(autouse=True)
def _real_gh() -> None:
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")


def issue(repo: str, number: int, state: str = "open", **extra: Any) -> dict[str, Any]:
    return {"number": number, "state": state, "updated_at": CHANGED, "title": f"t{number}",
            "repository_url": f"{API_HOST}/repos/{repo}",
            "html_url": f"https://github.localhost/{repo}/issues/{number}", **extra}


def polled(ref: str, *, session: bool = False, last: str = LONG_AGO) -> PortableRecord:
    return PortableRecord(ref=ref, session={"id": "s"} if session else None,
                          poll=PollSection(last_polled_at=last, announced_at=LONG_AGO,
                                           updated_at=CHANGED))


class Rig:
    """A poller over the real gh provider, with a clock the test moves."""

    def __init__(self, tmp_path: Path, fake_github: Any, repos: list[str],
                 fault: str = "") -> None:
        self.github = fake_github
        self.now = T0
        self.ledger = Ledger(tmp_path / "ledger")
        self.events: list[WorkItemEvent] = []
        # One run of gh per question: the runner's own retries of a 5xx are its business
        # (tested with it); here each question is one answer to count.
        runner = GhRunner(env=fake_github.env(), attempts=1, wait=tenacity.wait_none())
        self.provider = GhProvider(GhConfig(repos=repos), runner,
                                   question_deadline=question_deadline(fault),
                                   clock=lambda: self.now)
        self.poller = Poller(self.ledger, [self.provider], dispatch=self._dispatch,
                             emit=lambda *a, **k: None, interval=lambda: INTERVAL,
                             clock=lambda: self.now)

    def _dispatch(self, event: WorkItemEvent) -> int:
        self.events.append(event)
        return 0

    def plant(self, *records: PortableRecord) -> None:
        for record in records:
            self.ledger.write(record)

    def listing(self, repo: str, *numbers: int) -> None:
        """What ``repo`` lists from now on."""
        self.github.routes[f"/repos/{repo}/issues"] = [
            (200, {}, [issue(repo, n) for n in numbers])]

    def cycle(self, after: timedelta = timedelta(0)) -> PollSummary:
        self.now += after
        (summary,) = self.poller.cycle()
        return summary

    def asked(self, path: str) -> int:
        return self.github.paths().count(path)

    def opened(self) -> list[str]:
        return [e.ref.ref for e in self.events if e.kind == "opened"]


def fail(fake_github: Any, path: str, fault: str) -> None:
    if fault == "saml_403":
        fake_github.route(path, 403, {"message": SAML})
    elif fault == "server_error":
        fake_github.route(path, 502, {"message": "Server Error"})
    else:
        fake_github.hang(path)


FAULTS = ["saml_403", "server_error", "hang"]


def question_deadline(fault: str) -> float:
    """A hang is only seen when a question's deadline passes, so a rig with one waits
    a few seconds for it; every other rig gives a real ``gh`` all the time a loaded
    machine needs to start and answer, so no healthy question is cut short."""
    return 3.0 if fault == "hang" else 60.0


# -- relocation: a repository dropped from the configuration ----------------------------

@pytest.mark.parametrize("fault", FAULTS)
def test_a_stranded_repository_that_cannot_be_asked_never_stops_new_items(
        fake_github, tmp_path, fault):
    rig = Rig(tmp_path, fake_github, ["acme/widgets"], fault)
    rig.plant(polled("acme/widgets#1", last=format_utc(T0)), polled("acme/gone#5"))
    fail(fake_github, "/repos/acme/gone", fault)

    rig.listing("acme/widgets", 1, 2)
    first = rig.cycle()
    assert rig.opened() == ["acme/widgets#2"] and first.new == 1 and first.held == 0
    assert first.unresolved == {"acme/gone": "failed"}
    assert "acme/gone (could not tell whether it moved)" in first.failures()
    failing = rig.ledger.read("acme/gone#5").poll.backoff
    assert failing.failures == 1 and failing.next_ask_at > format_utc(T0)
    assert rig.asked("/repos/acme/gone") == 1

    rig.listing("acme/widgets", 1, 2, 3)
    soon = rig.cycle(timedelta(seconds=10))  # inside the backoff: not asked again
    assert rig.opened()[-1] == "acme/widgets#3" and soon.new == 1
    assert rig.asked("/repos/acme/gone") == 1
    assert soon.unresolved == {"acme/gone": "waiting"} and soon.failures()

    for number, hours in ((4, 6), (5, 6), (6, 12)):  # 24 h of it
        rig.listing("acme/widgets", *range(1, number + 1))
        summary = rig.cycle(timedelta(hours=hours))
        assert rig.opened()[-1] == f"acme/widgets#{number}" and summary.new == 1
        assert summary.failures() == ["acme/gone (could not tell whether it moved)"]
    assert rig.asked("/repos/acme/gone") == 4  # once per cycle past its backoff
    assert rig.ledger.read("acme/gone#5").poll.backoff.failures == 4
    assert rig.ledger.read("acme/gone#5").ended is None  # nothing decided on doubt


def test_never_seen_items_of_a_new_repository_wait_for_a_failing_relocation_a_window_only(
        fake_github, tmp_path):
    # acme/new may be acme/gone renamed: its items wait, so as not to be announced twice,
    # but only for a window after the question first failed.
    rig = Rig(tmp_path, fake_github, ["acme/new"])
    rig.plant(polled("acme/gone#5"))
    fail(fake_github, "/repos/acme/gone", "server_error")
    rig.listing("acme/new", 5, 6)

    first = rig.cycle()
    assert first.held == 2 and rig.opened() == [] and first.failures()
    later = rig.cycle(WINDOW / 2)
    assert later.held == 2 and rig.opened() == []
    rig.cycle(WINDOW / 2 + timedelta(seconds=1))
    assert sorted(rig.opened()) == ["acme/new#5", "acme/new#6"]


def test_a_stranded_repository_that_answers_again_is_resolved_and_moved(fake_github,
                                                                         tmp_path):
    rig = Rig(tmp_path, fake_github, ["acme/new"])
    rig.plant(polled("acme/old#1"))
    fail(fake_github, "/repos/acme/old", "server_error")
    rig.listing("acme/new", 1, 2)
    assert rig.cycle().held == 2
    fake_github.routes.pop("/repos/acme/old")
    fake_github.redirect("/repos/acme/old", "/repositories/9")
    fake_github.route("/repositories/9", 200, {"id": 9, "full_name": "acme/new"})

    summary = rig.cycle(timedelta(minutes=5))

    assert summary.moved == 1 and summary.unresolved == {} and summary.failures() == []
    assert rig.opened() == ["acme/new#2"]  # #1 is acme/old#1, moved: not announced again
    assert rig.ledger.read("acme/old#1").ended.moved_to == "acme/new#1"
    assert rig.ledger.read("acme/new#1").poll.backoff is None


# -- the tracked set ------------------------------------------------------------------

@pytest.mark.parametrize("fault", FAULTS)
def test_one_unanswerable_tracked_record_does_not_hold_its_repository(fake_github, tmp_path,
                                                                     fault):
    rig = Rig(tmp_path, fake_github, ["o/r"], fault)
    rig.listing("o/r")
    # o/r#1 sorts first; before issue 25 it was asked first every cycle, and a hang
    # took the repository's proof with it: 0 of 9 stamped in 3 cycles.
    healthy_numbers = [*range(2, 10), 20]  # not 10-19: the hang is a path prefix
    rig.plant(*(polled(f"o/r#{n}", session=True) for n in [1, *healthy_numbers]))
    fail(fake_github, "/repos/o/r/issues/1", fault)
    for n in healthy_numbers:
        fake_github.route(f"/repos/o/r/issues/{n}", 200,
                          issue("o/r", n, "closed", state_reason="completed"))

    first = rig.cycle()
    assert first.failing == 1
    assert first.failures() == ["1 record(s) whose closure question fails"]
    second = rig.cycle(timedelta(seconds=INTERVAL))  # the first backoff has come
    healthy = [rig.ledger.read(f"o/r#{n}") for n in healthy_numbers]
    assert all(record.ended is not None for record in healthy)
    assert first.closures + second.closures == 9
    assert rig.asked("/repos/o/r/issues/1") == 2  # asked last in the second cycle
    record = rig.ledger.read("o/r#1")
    assert record.ended is None and record.session == {"id": "s"}
    assert record.poll.backoff.failures == 2

    third = rig.cycle(timedelta(seconds=10))  # the doubled backoff has not come
    assert rig.asked("/repos/o/r/issues/1") == 2
    assert third.deferred == 1 and third.failing == 1 and third.failures()
    fourth = rig.cycle(timedelta(seconds=2 * INTERVAL))
    assert rig.asked("/repos/o/r/issues/1") == 3 and fourth.failures()


def test_a_tracked_record_that_answers_again_drops_its_backoff_and_the_failure(
        fake_github, tmp_path):
    rig = Rig(tmp_path, fake_github, ["o/r"])
    rig.listing("o/r")
    rig.plant(polled("o/r#1", session=True))
    fake_github.route("/repos/o/r/issues/1", 502, {"message": "Server Error"})
    fake_github.route("/repos/o/r/issues/1", 200, issue("o/r", 1))
    assert rig.cycle().failing == 1

    summary = rig.cycle(timedelta(seconds=INTERVAL))

    assert summary.failing == 0 and summary.failures() == []
    record = rig.ledger.read("o/r#1")
    assert record.poll.backoff is None and record.ended is None


def test_a_failing_record_listed_again_is_open_and_its_failure_no_longer_stands(
        fake_github, tmp_path):
    rig = Rig(tmp_path, fake_github, ["o/r"])
    rig.listing("o/r")  # a listing that missed it once
    rig.plant(polled("o/r#1", session=True, last=format_utc(T0)))
    fake_github.route("/repos/o/r/issues/1", 502, {"message": "Server Error"})
    assert rig.cycle().failing == 1

    rig.listing("o/r", 1)  # seen recently and unchanged: quiet, but for its backoff
    summary = rig.cycle(timedelta(seconds=INTERVAL))

    assert summary.failing == 0 and summary.failures() == []
    assert rig.ledger.read("o/r#1").poll.backoff is None
    assert rig.asked("/repos/o/r/issues/1") == 1


# -- deleted items -----------------------------------------------------------------------

def test_a_deleted_issue_is_not_asked_about_again_once_github_says_gone(fake_github,
                                                                        tmp_path):
    rig = Rig(tmp_path, fake_github, ["o/r"])
    rig.listing("o/r")
    rig.plant(polled("o/r#1", session=True), polled("o/r#2", session=True))
    fake_github.route("/repos/o/r/issues/1", 410, {"message": "This issue was deleted"})
    fake_github.route("/repos/o/r/issues/2", 404, {"message": "Not Found"})

    first = rig.cycle()
    assert first.gone == 1 and first.failing == 1  # 410 is final, a 404 not yet
    assert rig.ledger.read("o/r#1").poll.backoff.final
    for _ in range(4):
        rig.cycle(WINDOW)
    assert rig.asked("/repos/o/r/issues/1") == 1
    assert rig.asked("/repos/o/r/issues/2") == 3  # three 404s in a row are final
    last = rig.cycle(WINDOW)
    assert last.gone == 2 and last.failing == 0 and last.failures() == []
    for ref in ("o/r#1", "o/r#2"):
        record = rig.ledger.read(ref)
        assert record.ended is None and record.session == {"id": "s"}  # never stamped


def test_a_deleted_ledger_only_item_is_dated_not_asked(fake_github, tmp_path):
    rig = Rig(tmp_path, fake_github, ["o/r"])
    rig.listing("o/r")
    rig.plant(polled("o/r#1"))
    fake_github.route("/repos/o/r/issues/1", 410, {"message": "This issue was deleted"})
    assert rig.cycle().ledger_checks == 1
    for _ in range(3):
        summary = rig.cycle(WINDOW)
    assert rig.asked("/repos/o/r/issues/1") == 1
    assert summary.ledger_checks == 0 and summary.gone == 1 and summary.failures() == []


# -- across processes ------------------------------------------------------------------

def poll_env(fake_github: Any, root: Path) -> dict[str, str]:
    return {**os.environ, **fake_github.env(), "HOSTCORE_ROOT": str(root),
            "HOSTCORE_LOAD_PLUGINS": "hostcore-gh"}


def test_sigkill_mid_cycle_keeps_the_backoff_and_the_next_poll_once_honours_it(
        fake_github, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["o/r"]\n')
    ledger = Ledger(root / "ledger")
    for n in (1, 2):
        ledger.write(polled(f"o/r#{n}", session=True))
    ledger.close()
    fake_github.route("/repos/o/r/issues", 200, [])
    fake_github.route("/repos/o/r/issues/1", 403, {"message": SAML})
    fake_github.hang("/repos/o/r/issues/2")
    env = poll_env(fake_github, root)
    proc = subprocess.Popen([sys.executable, "-m", "hostcore", "poll", "--once"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while "/repos/o/r/issues/2" not in fake_github.paths():
            assert time.monotonic() < deadline, "the cycle never reached o/r#2"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # mid-cycle: o/r#2's question is under way
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    failing = Ledger(root / "ledger").read("o/r#1").poll.backoff
    assert failing.failures == 1 and failing.error.startswith("o/r#1:")

    fake_github.hung.clear()
    fake_github.route("/repos/o/r/issues/2", 200, issue("o/r", 2))
    done = subprocess.run([sys.executable, "-m", "hostcore", "poll", "--once", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode == 1, done.stderr
    assert "1 record(s) whose closure question fails" in done.stderr
    (summary,) = json.loads(done.stdout)
    assert summary["deferred"] == 1 and summary["tracked_checks"] == 1
    assert fake_github.paths().count("/repos/o/r/issues/1") == 1  # its backoff held
    assert Ledger(root / "ledger").read("o/r#1").poll.backoff.failures == 1


# -- the ledger-only set ---------------------------------------------------------------

@pytest.mark.parametrize("fault", FAULTS)
def test_a_failing_ledger_only_record_waits_a_window_and_its_failure_stands_meanwhile(
        fake_github, tmp_path, fault):
    rig = Rig(tmp_path, fake_github, ["o/r"], fault)
    rig.listing("o/r")
    rig.plant(*(polled(f"o/r#{n}") for n in (1, 2, 3)))
    fail(fake_github, "/repos/o/r/issues/1", fault)
    for n in (2, 3):
        fake_github.route(f"/repos/o/r/issues/{n}", 200, issue("o/r", n, "closed"))

    first = rig.cycle()
    if fault != "hang":  # a hang degrades the scope: the others wait a cycle
        assert first.closures == 2
    assert first.failing == 1 and first.failures()
    meanwhile = rig.cycle(WINDOW / 2)
    assert all(rig.ledger.read(f"o/r#{n}").ended is not None for n in (2, 3))
    assert rig.asked("/repos/o/r/issues/1") == 1  # dated: not asked inside the window
    assert meanwhile.failing == 1 and meanwhile.failures() == [
        "1 record(s) whose closure question fails"]

    fake_github.hung.clear()
    fake_github.routes["/repos/o/r/issues/1"] = [(200, {}, issue("o/r", 1))]
    answered = rig.cycle(WINDOW / 2 + timedelta(seconds=1))
    assert rig.asked("/repos/o/r/issues/1") == 2
    assert answered.failing == 0 and answered.failures() == []
    assert rig.ledger.read("o/r#1").poll.backoff is None


def test_poll_once_from_cron_announces_new_items_and_exits_1_while_a_stranded_scope_fails(
        hostcore_cli, register_plugin, fake_github, tmp_path):
    register_plugin(gh_plugin)
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["acme/widgets"]\n')
    ledger = Ledger(root / "ledger")
    ledger.write(polled("acme/widgets#1", last=format_utc(datetime.now(UTC))))
    ledger.write(polled("acme/gone#5"))
    ledger.close()
    fake_github.route("/repos/acme/gone", 403, {"message": SAML})
    runs = []
    for numbers in ((1, 2), (1, 2, 3)):  # two cron runs, the second inside the backoff
        fake_github.routes["/repos/acme/widgets/issues"] = [
            (200, {}, [issue("acme/widgets", n) for n in numbers])]
        runs.append(hostcore_cli("poll", "--once", "--json", env=fake_github.env(),
                                 root=root))
    for result in runs:
        assert result.exit_code == 1
        assert "gh: acme/gone (could not tell whether it moved)" in result.stderr
        (summary,) = json.loads(result.stdout)
        assert summary["new"] == 1 and summary["held"] == 0
    assert [json.loads(r.stdout)[0]["unresolved"] for r in runs] == [
        {"acme/gone": "failed"}, {"acme/gone": "waiting"}]
    assert fake_github.paths().count("/repos/acme/gone") == 1

    status = hostcore_cli("status", "--json", env=fake_github.env(), root=root)
    poll = json.loads(status.stdout)["components"]["worker"]["poll"]
    assert poll["last_cycle_unresolved"] == {"gh:acme/gone": "waiting"}
    assert poll["last_cycle"]["new"] == 1
