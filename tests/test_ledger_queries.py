"""The index queries a cycle and ``hostcore status`` rely on give what a walk of every
record gives, on generated ledgers: the scopes of unstamped records, the records of a
scope no longer owned, the due set, and the status counts (archive included)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcore.workitems.index import scope_key
from hostcore.workitems.items import WorkItemRef
from hostcore.workitems.ledger import EndedStamp, Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import Poller, _foreign_scope
from hostcore.workitems.records import absent_since_of, record_class

# Scope keys of several shapes: GitHub refs, a task folder's, refs with no separator.
SCOPES = ("a/x#", "b/y#", "B/y#", "task:inbox/", "agent:", "")
STAMPS = ("", "not a time", "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z",
          "2026-05-01T00:00:00Z", "2026-09-01T00:00:00Z")
CUTOFF, HORIZON = "2026-03-01T00:00:00Z", "2026-06-01T00:00:00Z"

Shape = tuple[str, int, str, str, str]

record_shape = st.tuples(
    st.sampled_from(SCOPES), st.integers(1, 40),
    st.sampled_from(("ledger_only", "tracked", "ended", "ended_polled", "other")),
    st.sampled_from(STAMPS), st.sampled_from(STAMPS))


def build(shape: Shape) -> PortableRecord:
    scope, number, kind, polled, checked = shape
    ref = f"{scope}{number}" if scope else f"solo-{number}"
    poll = PollSection(last_polled_at=polled, closure_checked_at=checked)
    ended = EndedStamp(at=polled or "2026-01-01T00:00:00Z", state="closed")
    return {
        "ledger_only": PortableRecord(ref=ref, poll=poll),
        "tracked": PortableRecord(ref=ref, poll=poll, session={"id": "s"}),
        "ended": PortableRecord(ref=ref, ended=ended, graph={"n": 1}),
        "ended_polled": PortableRecord(ref=ref, poll=poll, ended=ended),
        "other": PortableRecord(ref=ref, graph={"n": 2}),
    }[kind]


def planted(shapes: list[Shape], folder: Path) -> dict[str, PortableRecord]:
    """The ledger under ``folder`` holding one record per distinct ref of ``shapes``."""
    ledger = Ledger(folder)
    records = {}
    for shape in shapes:
        record = build(shape)
        records[record.ref] = record
    for record in records.values():
        ledger.write(record)
    ledger.close()
    return records


class OwnsSome:
    """Owns the refs of ``a/x`` and ``task:inbox``; places any ``#`` ref by its repo."""

    name = "some"

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith(("a/x#", "task:inbox/"))

    def scope_of(self, ref: WorkItemRef) -> str:
        if "#" not in ref.ref:
            raise ValueError("no repository")
        return ref.ref.split("#")[0].lower()  # case-folded: B/y and b/y are one scope


def stranded_by_walk(records: dict[str, PortableRecord], provider: OwnsSome,
                     asked_before: str | None) -> list[tuple[str, tuple[WorkItemRef, ...]]]:
    """What the poller computed before the index kept scope keys: every unstamped
    record visited, in ref order."""
    latest: dict[str, str] = {}
    refs: dict[str, list[WorkItemRef]] = {}
    for ref in sorted(records):
        record = records[ref]
        if record.ended is not None:
            continue
        scope = _foreign_scope(provider, ref)
        if scope is None:
            continue
        if asked_before is not None and absent_since_of(record.poll) >= asked_before:
            continue
        refs.setdefault(scope, []).append(WorkItemRef(ref))
        polled = record.poll.last_polled_at if record.poll else ""
        latest[scope] = max(latest.get(scope, ""), polled if isinstance(polled, str) else "")
    order = sorted(refs, key=lambda scope: (latest[scope], scope), reverse=True)
    return [(scope, tuple(sorted(refs[scope]))) for scope in order]


PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.lists(record_shape, max_size=60), st.sampled_from((None, *STAMPS[2:])))
def test_scopes_no_longer_owned_from_the_index_match_a_walk_of_every_record(shapes, asked):
    with tempfile.TemporaryDirectory() as tmp:
        records = planted(shapes, Path(tmp) / "ledger")
        ledger = Ledger(Path(tmp) / "ledger")
        unstamped = {ref for ref, r in records.items() if r.ended is None}
        keys = ledger.unstamped_scopes()
        assert sorted(k for k, _ in keys) == sorted({scope_key(ref) for ref in unstamped})
        assert all(sample in unstamped and scope_key(sample) == key for key, sample in keys)
        for key, _ in keys:
            walked = sorted(ref for ref in unstamped if scope_key(ref) == key and (
                asked is None or absent_since_of(records[ref].poll) < asked))
            assert [e.ref for e in ledger.unstamped_in(key, asked)] == walked
        poller = Poller(ledger, [], dispatch=lambda event: 0, emit=lambda *a, **k: None,
                        interval=lambda: 60.0)
        found = [(scope, tuple(sorted(refs))) for scope, refs in
                 poller._stranded(OwnsSome(), asked)]
        assert found == stranded_by_walk(records, OwnsSome(), asked)
        assert ledger.counters.reads == 0  # the index answered; no record was opened


@PROPERTY
@given(st.lists(record_shape, max_size=60))
def test_the_due_set_from_the_index_matches_a_walk_of_every_record(shapes):
    with tempfile.TemporaryDirectory() as tmp:
        records = planted(shapes, Path(tmp) / "ledger")
        ledger = Ledger(Path(tmp) / "ledger")

        def walked(horizon: str) -> list[str]:
            due = []
            for ref, record in records.items():
                if record_class(record) != "ledger_only":
                    continue
                since = absent_since_of(record.poll)
                if since <= CUTOFF or (horizon and since > horizon):
                    due.append(("" if horizon and since > horizon else since, ref))
            return [ref for _, ref in sorted(due)]

        assert [e.ref for e in ledger.ledger_only_due(CUTOFF)] == walked("")
        assert [e.ref for e in ledger.ledger_only_due(CUTOFF, HORIZON)] == walked(HORIZON)
        assert sorted(e.ref for e in ledger.tracked()) == sorted(
            ref for ref, r in records.items() if record_class(r) == "tracked")


@PROPERTY
@given(st.lists(record_shape, max_size=60), st.integers(0, 30), st.booleans())
def test_status_counts_match_a_walk_of_every_record_with_part_of_it_archived(
        shapes, archive_up_to, shadow):
    with tempfile.TemporaryDirectory() as tmp:
        records = planted(shapes, Path(tmp) / "ledger")
        ledger = Ledger(Path(tmp) / "ledger")
        moved = ledger.archive_ended("2026-12-31T00:00:00Z", archive_up_to).archived
        archived_refs = sorted(ref for ref in records
                               if not ledger.path_for(ref).exists())
        assert len(archived_refs) == moved
        if shadow and archived_refs:
            # A move killed between its commit and its unlink: the live file is back.
            ledger.write(records[archived_refs[0]])
            moved -= 1
        classes = [record_class(r) for r in records.values()]
        expected = {
            "records": len(records), "ended": classes.count("ended"),
            "tracked": classes.count("tracked"), "ledger_only": classes.count("ledger_only"),
            "malformed": 0, "archived": moved,
        }
        assert ledger.status() == expected
        assert Ledger(Path(tmp) / "ledger", read_only=True).status() == expected
        walked = [ref for ref, _ in Ledger(Path(tmp) / "ledger").iter_records()]
        assert sorted(walked) == sorted(records)  # each record once, archived or live
