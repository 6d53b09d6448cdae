"""Closure reconciliation: PollState's two methods, the ledger-only candidate set, the
shared question, the counter, and the abuse cases of the lazy reconciliation design."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)
from hostcore.workitems.ledger import Ledger, PollSection, PollState, PortableRecord, decode_record
from hostcore.workitems.poller import LEDGER_CHECKS_PER_CYCLE, LEDGER_RECHECK_EVERY_CYCLES, Poller

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
INTERVAL = 60.0
WINDOW = timedelta(seconds=LEDGER_RECHECK_EVERY_CYCLES * INTERVAL)


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


LONG_AGO = ts(NOW - WINDOW - timedelta(hours=5))


class RecordingLedger(Ledger):
    """A real Ledger that also keeps every record it wrote, in order."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.written: list[PortableRecord] = []

    def write(self, record: PortableRecord) -> None:
        self.written.append(record)
        super().write(record)


class FakeProvider:
    """An in-process provider: a listing per scope and scripted closure answers."""

    name = "fake"

    def __init__(self, scopes: tuple[str, ...] = ("o/r",)) -> None:
        self.scopes = list(scopes)
        self.status: dict[str, str] = {}
        self.items: list[WorkItem] = []
        self.answers: dict[str, Any] = {}
        self.asked: list[str] = []

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.split("#")[0] in self.scopes

    def scope_of(self, ref: WorkItemRef) -> str:
        return ref.ref.split("#")[0]

    def list_items(self) -> Listing:
        return Listing(tuple(
            ScopeListing(scope=s, status=self.status.get(s, "complete"),  # type: ignore[arg-type]
                         items=tuple(i for i in self.items if i.ref.ref.startswith(f"{s}#")))
            for s in self.scopes))

    def closure(self, ref: WorkItemRef) -> Any:
        self.asked.append(ref.ref)
        answer = self.answers.get(ref.ref, Closure(state="open"))
        if isinstance(answer, Exception):
            raise answer
        return answer


class Rig:
    def __init__(self, tmp_path: Path, **poller_kw: Any) -> None:
        self.ledger = RecordingLedger(tmp_path / "ledger")
        self.provider = FakeProvider()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.delivered: list[Any] = []
        self.on_disk_at_delivery: list[PortableRecord] = []
        self.now = NOW
        self.interval = INTERVAL
        self.poller = Poller(
            self.ledger, [self.provider], dispatch=self._dispatch,
            emit=lambda name, **attrs: self.events.append((name, attrs)),
            interval=lambda: self.interval, clock=lambda: self.now, **poller_kw)

    def _dispatch(self, event: Any) -> int:
        self.delivered.append(event)
        self.on_disk_at_delivery.append(self.record(event.ref.ref))
        return 0

    def plant(self, ref: str, last: Any = LONG_AGO, checked: Any = "", **sections: Any) -> None:
        poll = PollSection(last_polled_at=last, closure_checked_at=checked)
        self.ledger.write(PortableRecord(ref=ref, poll=poll, **sections))

    def record(self, ref: str) -> PortableRecord:
        return decode_record(self.ledger.path_for(ref).read_bytes(), what=ref)

    def cycle(self) -> Any:
        self.ledger.written.clear()
        self.provider.asked.clear()
        return self.poller.cycle()[0]

    def named(self, name: str) -> list[dict[str, Any]]:
        return [attrs for n, attrs in self.events if n == name]


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


# -- PollState ----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("last", "checked", "expected"),
    [
        ("2026-01-01T00:00:00Z", "", "2026-01-01T00:00:00Z"),
        ("", "2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z"),
        ("2026-01-03T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"),
        ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z"),
        ("yesterday", "2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z"),
        ("2026-01-01T00:00:00Z", "2026-13-40T99:00:00Z", "2026-01-01T00:00:00Z"),
        ("yesterday", "", ""),
        (1767225600, None, ""),
        ("2026-01-01 00:00:00", "2026-01-01T00:00:00+00:00", ""),
    ],
)
def test_absent_since_is_the_later_parsable_timestamp(tmp_path, last, checked, expected):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#1", poll=PollSection(last_polled_at=last,
                                                              closure_checked_at=checked)))
    assert PollState(ledger).absent_since("o/r#1") == expected


def test_absent_since_without_poll_or_record_is_empty(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#2", session={"id": "s"}))
    assert PollState(ledger).absent_since("o/r#2") == ""
    assert PollState(ledger).absent_since("o/r#3") == ""


def test_note_closure_check_writes_only_the_timestamp_once(rig):
    rig.ledger.write(PortableRecord(
        ref="o/r#1", extra={"future": {"k": 1}},
        poll=PollSection(last_polled_at=LONG_AGO, updated_at="u1", seen_comments=["c1"],
                         more={"newerField": True})))
    before = rig.record("o/r#1")
    rig.ledger.written.clear()
    PollState(rig.ledger).note_closure_check("o/r#1", ts(NOW))
    assert len(rig.ledger.written) == 1
    after = rig.record("o/r#1")
    assert after.poll is not None and after.poll.closure_checked_at == ts(NOW)
    assert msgspec.structs.replace(after.poll, closure_checked_at="") == before.poll
    assert after.extra == before.extra
    assert after.ended is None


def test_note_closure_check_leaves_a_record_without_poll_alone(rig):
    rig.ledger.write(PortableRecord(ref="o/r#1", session={"id": "s"}))
    rig.ledger.written.clear()
    PollState(rig.ledger).note_closure_check("o/r#1", ts(NOW))
    PollState(rig.ledger).note_closure_check("o/r#404", ts(NOW))
    assert rig.ledger.written == []
    assert not rig.ledger.path_for("o/r#404").exists()


# -- the candidate set ----------------------------------------------------------------

@pytest.mark.parametrize(
    "exclusion",
    ["listed", "stamped", "session", "control", "graph", "collaborators", "unowned",
     "degraded", "not_due"],
)
def test_each_exclusion_keeps_a_record_out_of_the_ledger_only_set(rig, exclusion):
    ref = "other/repo#1" if exclusion == "unowned" else "o/r#1"
    if exclusion == "unowned":
        rig.provider.scopes.append("x/y")  # a complete listing, just not of this scope
    sections: dict[str, Any] = {}
    if exclusion in ("session", "control", "graph", "collaborators"):
        sections[exclusion] = {"k": "v"}
    if exclusion == "stamped":
        from hostcore.workitems.ledger import EndedStamp
        sections["ended"] = EndedStamp(at=LONG_AGO, state="closed")
    last = ts(NOW - WINDOW + timedelta(seconds=1)) if exclusion == "not_due" else LONG_AGO
    rig.plant(ref, last=last, **sections)
    if exclusion == "listed":
        rig.provider.items.append(WorkItem(ref=WorkItemRef(ref), updated_at="u"))
    if exclusion == "degraded":
        rig.provider.status["o/r"] = "degraded"
    summary = rig.cycle()
    assert summary.ledger_checks == 0
    if exclusion in ("session", "control", "graph", "collaborators"):
        assert rig.provider.asked == [ref]  # tracked set, asked every cycle
        assert summary.tracked_checks == 1
    else:
        assert rig.provider.asked == []


def test_window_is_interval_times_recheck_cycles_read_each_cycle(rig):
    rig.plant("o/r#1", last=ts(NOW - WINDOW))          # exactly one window: due
    rig.plant("o/r#2", last=ts(NOW - WINDOW + timedelta(seconds=1)))  # a second short
    assert rig.cycle().ledger_checks == 1
    assert rig.provider.asked == ["o/r#1"]
    rig.interval = INTERVAL / 2  # a reloaded, shorter interval halves the window
    rig.now = NOW + timedelta(seconds=1)
    rig.cycle()
    assert rig.provider.asked == ["o/r#2"]


def test_closure_checked_at_restarts_the_window(rig):
    rig.plant("o/r#1", last=LONG_AGO, checked=ts(NOW - timedelta(minutes=5)))
    assert rig.cycle().ledger_checks == 0


def test_longest_absent_first_then_by_ref(tmp_path):
    rig = Rig(tmp_path, checks_per_cycle=3)
    rig.plant("o/r#5", last=ts(NOW - WINDOW - timedelta(hours=1)))
    rig.plant("o/r#3", last=ts(NOW - WINDOW - timedelta(hours=9)))
    rig.plant("o/r#4", last=ts(NOW - WINDOW - timedelta(hours=9)))
    rig.plant("o/r#1", last=LONG_AGO, checked=ts(NOW - WINDOW - timedelta(hours=2)))
    rig.cycle()
    assert rig.provider.asked == ["o/r#3", "o/r#4", "o/r#1"]


def test_cap_bounds_questions_per_cycle_and_the_rest_wait(rig):
    for n in range(1, 26):
        rig.plant(f"o/r#{n}", last=ts(NOW - WINDOW - timedelta(minutes=n)))
    first = rig.cycle()
    assert first.ledger_checks == LEDGER_CHECKS_PER_CYCLE
    assert len(rig.provider.asked) == LEDGER_CHECKS_PER_CYCLE
    second = rig.cycle()
    assert second.ledger_checks == 5
    assert sorted(rig.provider.asked) == sorted(f"o/r#{n}" for n in range(1, 6))
    assert rig.cycle().ledger_checks == 0


def test_cap_counts_questions_not_skipped_records(tmp_path):
    rig = Rig(tmp_path, checks_per_cycle=2)
    rig.provider.status["d/d"] = "degraded"
    rig.provider.scopes.append("d/d")
    for n in range(1, 6):  # oldest first, but nobody will ask about these
        rig.plant(f"a/unowned#{n}", last=ts(NOW - WINDOW - timedelta(days=9, minutes=n)))
        rig.plant(f"d/d#{n}", last=ts(NOW - WINDOW - timedelta(days=8, minutes=n)))
    rig.plant("o/r#1", last=LONG_AGO)
    rig.plant("o/r#2", last=LONG_AGO)
    assert rig.cycle().ledger_checks == 2
    assert rig.provider.asked == ["o/r#1", "o/r#2"]


@pytest.mark.parametrize("bad", ["", "not a time", "2026-02-30T00:00:00Z", 42, None, ["x"]])
def test_an_unparsable_timestamp_is_due(rig, bad):
    rig.plant("o/r#1", last=bad, checked=bad)
    assert rig.cycle().ledger_checks == 1
    poll = rig.record("o/r#1").poll
    assert poll is not None and poll.closure_checked_at == ts(NOW)


def test_a_timestamp_less_than_a_window_ahead_is_not_due(rig):
    rig.plant("o/r#1", last=ts(NOW + WINDOW))
    rig.plant("o/r#2", last=LONG_AGO, checked=ts(NOW + timedelta(seconds=1)))
    summary = rig.cycle()
    assert summary.ledger_checks == 0 and summary.future_stamps == 0
    assert rig.ledger.written == []


# -- the question's outcomes ------------------------------------------------------------

@pytest.mark.parametrize("outcome", ["open", "provider_error"])
def test_non_closure_dates_a_ledger_only_record_with_exactly_one_write(rig, outcome):
    rig.plant("o/r#1")
    if outcome == "provider_error":
        rig.provider.answers["o/r#1"] = ProviderError("o/r#1: not found", ref="o/r#1")
    before = rig.record("o/r#1")
    rig.cycle()
    assert len(rig.ledger.written) == 1
    after = rig.record("o/r#1")
    assert after.poll is not None and after.poll.closure_checked_at == ts(NOW)
    assert after.poll.last_polled_at == before.poll.last_polled_at  # type: ignore[union-attr]
    assert after.ended is None
    if outcome == "provider_error":
        assert rig.named("poll.item_error") == [
            {"stage": "closure", "set": "ledger_only", "will_retry": True}]


def test_still_open_leaves_a_tracked_record_unchanged(rig):
    rig.plant("o/r#1", control={"armed": True})
    before = rig.ledger.path_for("o/r#1").read_bytes()
    summary = rig.cycle()
    assert rig.ledger.written == []
    assert rig.ledger.path_for("o/r#1").read_bytes() == before
    assert summary.tracked_checks == 1
    rig.cycle()
    assert rig.provider.asked == ["o/r#1"]  # asked again the next cycle


def test_no_answer_puts_a_tracked_record_on_a_backoff_of_one_interval(rig):
    # (Until issue 25 a failed question wrote nothing and was asked again every cycle,
    # first: one record that never answers held its repository.)
    rig.plant("o/r#1", control={"armed": True})
    rig.provider.answers["o/r#1"] = ProviderError("boom", ref="o/r#1")
    summary = rig.cycle()
    (written,) = rig.ledger.written
    failing = written.poll.backoff
    assert failing.failures == 1 and failing.error == "o/r#1: boom"
    assert written.control == {"armed": True} and written.ended is None
    assert summary.tracked_checks == 1 and summary.failing == 1
    assert rig.cycle().deferred == 1 and rig.provider.asked == []  # not due yet
    rig.now += timedelta(seconds=INTERVAL)
    rig.cycle()
    assert rig.provider.asked == ["o/r#1"]  # due again after one interval


@pytest.mark.parametrize("state", ["closed", "merged"])
def test_closure_stamps_then_forgets_leaving_ended_only(rig, state):
    rig.plant("o/r#1")
    rig.provider.answers["o/r#1"] = Closure(state=state, state_reason="completed",
                                            closed_by="octo")
    summary = rig.cycle()
    stamped, forgotten = rig.ledger.written
    assert stamped.ended is not None and stamped.poll is not None
    assert forgotten.ended == stamped.ended and forgotten.poll is None
    final = rig.record("o/r#1")
    assert final.ended is not None and final.ended.state == state
    assert final.ended.state_reason == "completed" and final.ended.at == ts(NOW)
    assert final.poll is None and final.sections == 32  # ended only
    assert summary.closures == 1 and summary.ledger_checks == 1
    assert rig.named("poll.closure_detected") == [{"set": "ledger_only", "state": state}]
    assert [e.kind for e in rig.delivered] == ["closed"]
    (at_delivery,) = rig.on_disk_at_delivery  # the stamp is durable before anyone hears
    assert at_delivery.ended is not None and at_delivery.poll is not None
    assert rig.cycle().ledger_checks == 0  # stamped: never asked again


def test_tracked_closure_clears_control_and_collaborators_keeps_session(rig):
    rig.plant("o/r#1", session={"id": "s1"}, control={"armed": True},
              collaborators={"who": ["a"]})
    rig.provider.answers["o/r#1"] = Closure(state="closed")
    rig.cycle()
    final = rig.record("o/r#1")
    assert final.ended is not None and final.poll is None
    assert final.control is None and final.collaborators is None
    assert final.session == {"id": "s1"}
    assert rig.named("poll.closure_detected") == [{"set": "tracked", "state": "closed"}]


def test_ledger_checks_counter_and_cycle_event_omit_zero(rig):
    rig.cycle()
    (quiet,) = rig.named("poll.cycle")
    assert "ledger_checks" not in quiet and "closures" not in quiet
    rig.events.clear()
    for n in range(1, 4):
        rig.plant(f"o/r#{n}")
    summary = rig.cycle()
    assert summary.ledger_checks == 3
    (busy,) = rig.named("poll.cycle")
    assert busy["ledger_checks"] == 3


@pytest.mark.parametrize("status", ["failed", "interrupted"])
def test_no_reconciliation_without_a_complete_listing(rig, status):
    rig.plant("o/r#1")
    rig.plant("o/r#2", session={"id": "s"})
    rig.provider.status["o/r"] = status
    summary = rig.cycle()
    assert rig.provider.asked == [] and summary.ledger_checks == 0
    assert summary.listing == "partial"


def test_a_rate_limit_answer_degrades_the_rest_of_its_scope(rig):
    for n in range(1, 5):
        rig.plant(f"o/r#{n}", last=ts(NOW - WINDOW - timedelta(minutes=10 - n)))
    rig.provider.answers["o/r#1"] = ProviderError("rate limited", ref="o/r#1", scope="o/r",
                                                  degrades_scope=True)
    summary = rig.cycle()
    assert rig.provider.asked == ["o/r#1"]
    assert summary.ledger_checks == 1


# -- abuse ------------------------------------------------------------------------------

def test_a_thousand_planted_records_cost_at_most_the_cap_per_cycle(rig):
    for n in range(1, 1001):
        rig.plant(f"o/r#{n}", last=ts(NOW - WINDOW - timedelta(seconds=n)))
    asked: list[str] = []
    for cycle in range(8):
        rig.now = NOW + timedelta(seconds=cycle * INTERVAL)
        rig.cycle()
        assert len(rig.provider.asked) <= LEDGER_CHECKS_PER_CYCLE
        asked += rig.provider.asked
    assert len(asked) == len(set(asked)) == 8 * LEDGER_CHECKS_PER_CYCLE  # once per window


def test_an_unanswerable_record_does_not_starve_the_rest(tmp_path):
    rig = Rig(tmp_path, checks_per_cycle=1)
    rig.plant("o/r#999999", last="forged")  # sorts first, GitHub cannot answer about it
    rig.plant("o/r#2", last=LONG_AGO)
    rig.provider.answers["o/r#999999"] = ProviderError("o/r#999999: not found")
    rig.provider.answers["o/r#2"] = Closure(state="closed")
    rig.cycle()
    assert rig.provider.asked == ["o/r#999999"]
    rig.cycle()
    assert rig.provider.asked == ["o/r#2"]
    assert rig.record("o/r#2").ended is not None
    assert rig.record("o/r#999999").ended is None


def test_a_forged_future_timestamp_delays_at_most_a_window(rig):
    rig.plant("o/r#1", last=ts(NOW + WINDOW - timedelta(minutes=1)))
    rig.plant("o/r#2", last=ts(NOW + timedelta(days=30)))  # beyond the window: due now
    rig.provider.answers["o/r#1"] = Closure(state="closed")
    rig.cycle()
    assert rig.provider.asked == ["o/r#2"] and rig.record("o/r#1").ended is None
    repaired = rig.record("o/r#2").poll
    assert repaired.last_polled_at == "" and repaired.closure_checked_at == ts(NOW)
    rig.now = NOW + 2 * WINDOW
    rig.cycle()
    assert "o/r#1" in rig.provider.asked and rig.record("o/r#1").ended is not None


@pytest.mark.parametrize(
    "answer",
    [ProviderError("cannot say"), None, "closed", {"state": "closed"}, RuntimeError("bug"),
     Closure(state="open")],
)
def test_nothing_is_stamped_on_doubt(rig, answer):
    rig.plant("o/r#1")
    rig.plant("o/r#2", session={"id": "s"})
    rig.provider.answers = {"o/r#1": answer, "o/r#2": answer}
    summary = rig.cycle()
    assert summary.closures == 0
    assert rig.record("o/r#1").ended is None and rig.record("o/r#2").ended is None
    assert rig.named("poll.closure_detected") == []


def test_index_is_not_trusted_before_asking(rig):
    rig.plant("o/r#1")
    # Make the record tracked behind the index's back, with the folder mtime restored,
    # so only the re-read before asking can notice.
    import os
    path = rig.ledger.path_for("o/r#1")
    folder = rig.ledger.portable
    stat, dstat = path.stat(), folder.stat()
    data = path.read_bytes().replace(b'"poll"', b'"session":{"id":"s"},"poll"')
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.utime(folder, ns=(dstat.st_atime_ns, dstat.st_mtime_ns))
    summary = rig.cycle()
    assert summary.ledger_checks == 0
