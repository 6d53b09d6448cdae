"""The ledger index: re-derivable, validated against the folder, rebuilt when damaged,
and cheap: candidate queries read no record when nothing changed."""

from __future__ import annotations

import sqlite3

import pytest

from hostcore.workitems.ledger import Ledger
from hostcore.workitems.records import (
    POLL,
    SESSION,
    EndedStamp,
    PollSection,
    PortableRecord,
    encode_record,
)


def events_into(bucket):
    return lambda name, **attrs: bucket.append((name, attrs))


def fill(ledger: Ledger, count: int) -> None:
    for n in range(count):
        ledger.write(PortableRecord(ref=f"o/r#{n}", poll=PollSection(
            last_polled_at=f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z")))


def test_queries_read_no_record_when_nothing_changed(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 50)
    fresh = Ledger(tmp_path / "ledger")  # a new process: opens the index, reads nothing
    due = fresh.ledger_only_due("2026-01-01T00:00:09Z")
    assert [e.ref for e in due] == [f"o/r#{n}" for n in range(10)]
    assert fresh.tracked() == []
    assert fresh.counters.reads == 0 and fresh.counters.writes == 0


def test_a_missing_index_is_derived_from_the_records(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 5)
    ledger.close()
    ledger.index_path.unlink()
    events: list = []
    again = Ledger(tmp_path / "ledger", on_event=events_into(events))
    assert len(again.entries(with_bits=POLL)) == 5
    assert events == [("ledger.index_rebuilt",
                       {"records": 5, "malformed": 0, "reason": "missing"})]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong_format", "bad_rows"])
def test_a_damaged_index_is_rebuilt_never_trusted(tmp_path, damage):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 20)
    ledger.close()
    path = ledger.index_path
    if damage == "garbage":
        path.write_bytes(b"this is not a database" * 500)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:1500])
    elif damage == "wrong_format":
        with sqlite3.connect(path) as db:
            db.execute("UPDATE meta SET value = '999' WHERE key = 'format'")
    else:
        with sqlite3.connect(path) as db:
            db.execute("DROP TABLE entries")
            db.execute("CREATE TABLE entries (slug TEXT)")
    events: list = []
    again = Ledger(tmp_path / "ledger", on_event=events_into(events))
    due = again.ledger_only_due("2030-01-01T00:00:00Z")
    assert sorted(e.ref for e in due) == sorted(f"o/r#{n}" for n in range(20))
    assert [name for name, _ in events] == ["ledger.index_rebuilt"]
    assert events[0][1]["reason"] in ("damaged", "format")


def test_a_change_behind_the_index_is_picked_up_reading_only_that_file(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 30)
    other = Ledger(tmp_path / "ledger")  # another process writes through its own object
    other.write(PortableRecord(ref="o/r#3", session={"id": "s"},
                               poll=PollSection(last_polled_at="2026-01-01T00:00:03Z")))
    reads = ledger.counters.reads
    assert [e.ref for e in ledger.tracked()] == ["o/r#3"]
    assert ledger.counters.reads - reads == 0  # the other writer updated the shared index
    # A writer that bypasses the Ledger (a restore from backup, a hand edit via rename):
    path = ledger.path_for("o/r#4")
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_record(PortableRecord(ref="o/r#4", graph={"g": 1})))
    tmp.rename(path)
    reads = ledger.counters.reads
    assert sorted(e.ref for e in ledger.tracked()) == ["o/r#3", "o/r#4"]
    assert ledger.counters.reads - reads == 1


def test_deleted_records_leave_the_index(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 3)
    ledger.path_for("o/r#1").unlink()
    assert sorted(e.ref for e in ledger.entries(with_bits=POLL)) == ["o/r#0", "o/r#2"]


def test_status_counts_sections_and_malformed(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 3)
    ledger.write(PortableRecord(ref="o/r#10", session={"id": "s"}))
    ledger.write(PortableRecord(ref="o/r#11", ended=EndedStamp(at="t", state="closed")))
    (ledger.portable / "bad-1.json").write_bytes(b"{")
    assert ledger.status() == {"records": 5, "ended": 1, "tracked": 1, "ledger_only": 3,
                               "malformed": 1, "archived": 0}
    (ledger.portable / "bad-1.json").unlink()
    assert ledger.status()["malformed"] == 0


def test_rebuild_index_on_request_matches_incremental_index(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 40)
    ledger.write(PortableRecord(ref="o/r#7", session={"id": "s"}))
    before = ledger.entries()
    assert ledger.rebuild_index() == 40
    assert ledger.entries() == before
    assert ledger.entries(with_bits=SESSION)[0].ref == "o/r#7"


def test_entry_is_none_for_unknown_refs(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    fill(ledger, 1)
    assert ledger.entry("o/r#0") is not None
    assert ledger.entry("o/r#1") is None
