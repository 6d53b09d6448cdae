"""The poller under faults, in process: one scope's failure pauses only its own records,
a cycle has a budget, a wrong clock cannot freeze reconciliation, a killed close path is
finished, a move is never made on doubt."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hostcore.timestamps import format_utc
from hostcore.workitems.items import (
    Closure,
    Listing,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)
from hostcore.workitems.ledger import EndedStamp, Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import LEDGER_RECHECK_EVERY_CYCLES, Poller, PollSummary

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
INTERVAL = 60.0
WINDOW = timedelta(seconds=LEDGER_RECHECK_EVERY_CYCLES * INTERVAL)
LONG_AGO = format_utc(NOW - WINDOW - timedelta(hours=5))


class ScopedProvider:
    """Scopes with a status each, items per scope, scripted closure answers."""

    name = "scoped"

    def __init__(self, *scopes: str) -> None:
        self.scopes = {scope: "complete" for scope in scopes}
        self.since: dict[str, str] = {}
        self.items: dict[str, list[WorkItem]] = {scope: [] for scope in scopes}
        self.answers: dict[str, Any] = {}
        self.asked: list[str] = []
        self.delay = 0.0

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.split("#")[0] in self.scopes

    def scope_of(self, ref: WorkItemRef) -> str:
        return ref.ref.split("#")[0]

    def list_items(self) -> Listing:
        return Listing(tuple(
            ScopeListing(scope=scope, status=status,  # type: ignore[arg-type]
                         items=tuple(self.items[scope]), changed_since=self.since.get(scope, ""),
                         reason="" if status == "complete" else f"{scope} is {status}")
            for scope, status in self.scopes.items()))

    def closure(self, ref: WorkItemRef) -> Any:
        self.asked.append(ref.ref)
        time.sleep(self.delay)
        answer = self.answers.get(ref.ref, Closure(state="open"))
        if isinstance(answer, Exception):
            raise answer
        return answer


class Rig:
    def __init__(self, tmp_path: Path, provider: ScopedProvider, **poller_kw: Any) -> None:
        self.ledger = Ledger(tmp_path / "ledger")
        self.provider = provider
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.delivered: list[Any] = []
        self.now = NOW
        self.poller = Poller(
            self.ledger, [provider], dispatch=lambda event: self.delivered.append(event) or 0,
            emit=lambda name, **attrs: self.events.append((name, attrs)),
            interval=lambda: INTERVAL, clock=lambda: self.now, **poller_kw)

    def plant(self, ref: str, *, last: str = LONG_AGO, checked: str = "",
              updated: str = "u", **sections: Any) -> None:
        self.ledger.write(PortableRecord(ref=ref, poll=PollSection(
            last_polled_at=last, closure_checked_at=checked, announced_at=LONG_AGO,
            updated_at=updated), **sections))

    def cycle(self) -> PollSummary:
        self.provider.asked.clear()
        self.events.clear()
        (summary,) = self.poller.cycle()
        return summary

    def cycle_event(self) -> dict[str, Any]:
        (attrs,) = [attrs for name, attrs in self.events if name == "poll.cycle"]
        return attrs


# -- reconciliation per scope -----------------------------------------------------------

@pytest.mark.parametrize("status", ["failed", "interrupted", "degraded"])
def test_a_scope_that_proves_nothing_pauses_only_its_own_records(tmp_path, status):
    rig = Rig(tmp_path, ScopedProvider("good/repo", "bad/repo"))
    rig.provider.scopes["bad/repo"] = status
    for scope in ("good/repo", "bad/repo"):
        rig.plant(f"{scope}#1", session={"id": "s"})
        rig.plant(f"{scope}#2")
        rig.provider.answers[f"{scope}#1"] = Closure(state="closed")
        rig.provider.answers[f"{scope}#2"] = Closure(state="closed")
    summary = rig.cycle()
    assert sorted(rig.provider.asked) == ["good/repo#1", "good/repo#2"]
    assert summary.closures == 2 and summary.paused == 2
    assert summary.unlisted == {"bad/repo": status}
    assert rig.ledger.read("bad/repo#1").ended is None
    assert rig.cycle_event()["paused"] == 2


def test_an_interrupted_scope_with_a_change_marker_reconciles_the_later_changed(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("big/repo"))
    rig.provider.scopes["big/repo"] = "interrupted"
    rig.provider.since["big/repo"] = "2026-03-08T00:00:00Z"
    rig.plant("big/repo#1", session={"id": "s"}, updated="2026-03-09T00:00:00Z")
    rig.plant("big/repo#2", session={"id": "s"}, updated="2026-03-08T00:00:00Z")  # a tie
    rig.plant("big/repo#3", updated="2026-04-01T00:00:00Z")
    summary = rig.cycle()
    assert sorted(rig.provider.asked) == ["big/repo#1", "big/repo#3"]
    assert summary.paused == 1


def test_a_rate_limited_answer_pauses_the_rest_of_its_scope_only(tmp_path):
    from hostcore.workitems.items import ProviderError

    rig = Rig(tmp_path, ScopedProvider("a/a", "b/b"))
    for ref in ("a/a#1", "a/a#2", "b/b#1"):
        rig.plant(ref, session={"id": "s"})
    rig.provider.answers["a/a#1"] = ProviderError("limited", ref="a/a#1", scope="a/a",
                                                  degrades_scope=True)
    summary = rig.cycle()
    assert rig.provider.asked == ["a/a#1", "b/b#1"]
    assert summary.paused == 1


# -- a cycle has a deadline ---------------------------------------------------------------

def test_the_cycle_budget_stops_the_questions_and_says_so(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("o/r"), budget=lambda: 0.5)
    rig.provider.delay = 0.2
    for n in range(1, 11):
        rig.plant(f"o/r#{n}", session={"id": "s"})
    started = time.monotonic()
    summary = rig.cycle()
    assert time.monotonic() - started < 1.0
    assert 2 <= len(rig.provider.asked) <= 4
    assert summary.budget_spent and summary.tracked_checks == len(rig.provider.asked)
    assert rig.cycle_event()["budget_spent"] is True


def test_each_provider_gets_a_share_of_the_budget(tmp_path):
    slow, quick = ScopedProvider("s/s"), ScopedProvider("q/q")
    slow.name, quick.name = "slow", "quick"
    slow.delay = 0.3
    ledger = Ledger(tmp_path / "ledger")
    for n in range(1, 6):
        ledger.write(PortableRecord(ref=f"s/s#{n}", session={"id": "s"}))
        ledger.write(PortableRecord(ref=f"q/q#{n}", session={"id": "s"}))
    poller = Poller(ledger, [slow, quick], dispatch=lambda event: 0,
                    emit=lambda *a, **k: None, interval=lambda: INTERVAL, budget=lambda: 1.0)
    first, second = poller.cycle()
    assert first.budget_spent and len(slow.asked) < 5
    assert not second.budget_spent and len(quick.asked) == 5


# -- a wrong clock ---------------------------------------------------------------------------

def test_a_clock_a_year_ahead_does_not_freeze_reconciliation(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("o/r"))
    item = WorkItem(ref=WorkItemRef("o/r#1"), updated_at="u")
    rig.provider.items["o/r"] = [item]
    rig.now = NOW + timedelta(days=365)  # one cycle with the clock a year ahead
    rig.cycle()
    ahead = rig.ledger.read("o/r#1").poll.last_polled_at
    assert ahead == format_utc(NOW + timedelta(days=365))
    rig.now = NOW  # the clock is right again, and the item closed
    rig.provider.items["o/r"] = []
    rig.provider.answers["o/r#1"] = Closure(state="closed")
    summary = rig.cycle()
    assert rig.provider.asked == ["o/r#1"]  # due now, not in a year
    assert rig.ledger.read("o/r#1").ended is not None
    assert summary.future_stamps == 1 and rig.cycle_event()["future_stamps"] == 1


def test_a_future_stamp_is_repaired_on_the_next_write(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("o/r"))
    rig.plant("o/r#1", last=format_utc(NOW + timedelta(days=365)))
    rig.plant("o/r#2", last=LONG_AGO, checked=format_utc(NOW + 2 * WINDOW))
    summary = rig.cycle()
    assert sorted(rig.provider.asked) == ["o/r#1", "o/r#2"] and summary.future_stamps == 2
    for ref in ("o/r#1", "o/r#2"):
        poll = rig.ledger.read(ref).poll
        assert poll.closure_checked_at == format_utc(NOW)
        assert poll.last_polled_at in ("", LONG_AGO)
    assert rig.cycle().future_stamps == 0 and rig.provider.asked == []


def test_a_listed_item_with_a_future_stamp_is_counted_and_rewritten(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("o/r"))
    rig.plant("o/r#1", last=format_utc(NOW + timedelta(days=30)))
    rig.provider.items["o/r"] = [WorkItem(ref=WorkItemRef("o/r#1"), updated_at="u")]
    assert rig.cycle().future_stamps == 1
    assert rig.ledger.read("o/r#1").poll.last_polled_at == format_utc(NOW)


# -- records always have a way out ---------------------------------------------------------

CLOSE_AND_DIE = """
import os, signal, sys
from datetime import UTC, datetime
from hostcore.workitems.items import Closure, Listing, ScopeListing
from hostcore.workitems.ledger import Ledger
from hostcore.workitems.poller import Poller

class Closing:
    name = "closing"
    def owns(self, ref): return True
    def scope_of(self, ref): return "o/r"
    def list_items(self): return Listing((ScopeListing(scope="o/r", status="complete"),))
    def closure(self, ref): return Closure(state="closed", state_reason="completed")

def die(event):  # the process is killed between the stamp and the forget
    os.kill(os.getpid(), signal.SIGKILL)

Poller(Ledger(sys.argv[1]), [Closing()], dispatch=die, emit=lambda *a, **k: None,
       interval=lambda: 60.0).cycle()
"""


def test_a_kill_between_stamp_and_forget_is_finished_by_the_next_cycle(tmp_path):
    folder = tmp_path / "ledger"
    ledger = Ledger(folder)
    ledger.write(PortableRecord(ref="o/r#1", session={"id": "s"},
                                poll=PollSection(last_polled_at=LONG_AGO)))
    ledger.close()
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(CLOSE_AND_DIE), str(folder)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr
    left = Ledger(folder).read("o/r#1")
    assert left.ended is not None and left.poll is not None  # {poll, ended}
    rig = Rig(tmp_path, ScopedProvider("o/r"))
    rig.provider.scopes["o/r"] = "failed"  # the finish needs no listing
    rig.cycle()
    done = json.loads(rig.ledger.path_for("o/r#1").read_text())
    assert set(done) == {"ref", "session", "ended"}
    assert rig.provider.asked == [] and rig.delivered == []


@pytest.mark.parametrize("moved_to", ["", "o/r#1", " padded ", "x" * 600])
def test_a_move_to_nowhere_is_no_answer(tmp_path, moved_to):
    rig = Rig(tmp_path, ScopedProvider("o/r"))
    rig.plant("o/r#1", session={"id": "s"})
    rig.provider.answers["o/r#1"] = Closure(state="moved", moved_to=moved_to)
    summary = rig.cycle()
    assert rig.ledger.read("o/r#1").ended is None and summary.moved == 0
    assert any("moved without a new ref" in e for e in summary.errors)


def test_a_moved_answer_stamps_moved_and_delivers_a_moved_event(tmp_path):
    rig = Rig(tmp_path, ScopedProvider("o/r", "p/q"))
    rig.plant("o/r#1", session={"id": "s"}, control={"armed": True})
    rig.provider.answers["o/r#1"] = Closure(state="moved", moved_to="p/q#9")
    summary = rig.cycle()
    old = rig.ledger.read("o/r#1")
    assert old.ended == EndedStamp(at=format_utc(NOW), state="moved", moved_to="p/q#9")
    assert old.poll is None and old.control is None
    new = rig.ledger.read("p/q#9")
    assert new.session == {"id": "s"} and new.control == {"armed": True}
    assert new.poll is not None and new.poll.announced_at == LONG_AGO
    assert [(e.kind, e.closure.moved_to) for e in rig.delivered] == [("moved", "p/q#9")]
    assert summary.moved == 1 and summary.closures == 0
    closure_events = [a for n, a in rig.events if n == "poll.closure_detected"]
    assert closure_events == [{"set": "tracked", "state": "moved"}]


# -- exit status ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("summary", "failures"),
    [
        (PollSummary(provider="p", available=False, configured=False), []),
        (PollSummary(provider="p", available=False), ["unavailable"]),
        (PollSummary(provider="p", listing="failed"), ["could not list"]),
        (PollSummary(provider="p", unlisted={"a/b": "failed", "c/d": "interrupted",
                                             "e/f": "degraded"}),
         ["a/b (failed)", "c/d (interrupted)", "e/f (degraded)"]),
        (PollSummary(provider="p", unlisted={"big/repo": "interrupted"},
                     capped=["big/repo"]), []),
        (PollSummary(provider="p", unresolved={"o/gone": "failed"}, failing=2),
         ["o/gone (could not tell whether it moved)",
          "2 record(s) whose closure question fails"]),
        (PollSummary(provider="p", ledger_error="No space left on device"),
         ["ledger: No space left on device"]),
    ],
)
def test_what_fails_a_poll_once(summary, failures):
    assert summary.failures() == failures


def test_the_cycle_event_is_documented_with_its_new_attributes():
    text = (Path(__file__).resolve().parents[1] / "docs" / "events.md").read_text()
    section = text.split("## poll.cycle", 1)[1].split("\n## ", 1)[0]
    for name in ("paused", "moved", "future_stamps", "budget_spent", "ledger_failed"):
        assert f"| `{name}` |" in section, name

