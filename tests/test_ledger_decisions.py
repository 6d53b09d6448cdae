"""The export's decisions identity comes from the ledger index: one query when nothing
changed, the same value a read of every record gives."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from hostcore.export.exporter import decisions_identity
from hostcore.export.ref import fold, identity
from hostcore.workitems.ledger import EndedStamp, Ledger, PollSection, PortableRecord, encode_record

_sorted = msgspec.json.Encoder(order="sorted")


def read_every_record(ledger_dir: Path) -> str:
    """The identity as defined, computed the slow way: every record file decoded."""
    members = {}
    for ref, record in Ledger(ledger_dir).iter_records():
        sections = (record.control, record.session, record.ended)
        if any(section is not None for section in sections):
            members[ref] = identity(ref, *(_sorted.encode(s).decode() for s in sections))
    return fold(members)


def polled(minute: int) -> PollSection:
    return PollSection(last_polled_at=f"2024-05-01T10:{minute:02d}:00Z", seen_comments=["c1"])


def write_behind_the_index(ledger: Ledger, record: PortableRecord) -> None:
    """A writer that bypasses the Ledger: an atomic rename into portable/."""
    time.sleep(0.02)  # past the file system's coarse clock tick, so the folder's mtime moves
    path = ledger.path_for(record.ref)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_record(record))
    tmp.rename(path)


def test_decisions_identity_is_one_index_query_and_equals_a_full_read(make_host):
    host = make_host()
    ledger = host.ledger
    for n in range(40):
        ledger.write(PortableRecord(ref=f"o/r#{n}", poll=polled(n % 60)))  # poll-only
    ledger.write(PortableRecord(ref="o/r#100", control={"assignee": "me", "b": [1, 2]}))
    # Int keys read back as strings (and sort as strings): the member is of the record
    # as the file holds it.
    ledger.write(PortableRecord(ref="o/r#101", session={"id": "s1", 10: "a", 9: "b"},
                                poll=polled(1)))
    ledger.write(PortableRecord(ref="o/r#102", ended=EndedStamp(
        at="2024-06-01T00:00:00Z", state="closed", more={"by": "bot"})))
    (ledger.portable / "broken-0123.json").write_bytes(b"{not json")  # skipped by both
    ledger_dir = ledger.directory

    # (a) the value is the fold over every decision-bearing record, as it reads back
    first = decisions_identity(host)
    assert first == read_every_record(ledger_dir)
    assert first != fold({})

    # (b) asked again with nothing changed: no record file is read
    reads = ledger.counters.reads
    assert decisions_identity(host) == first
    assert ledger.counters.reads == reads
    another = Ledger(ledger_dir)  # another process opening the same index
    assert fold(another.decision_members()) == first
    assert another.counters.reads == 0

    # (c) a changed decision section changes it, written through the Ledger or behind it
    ledger.write(PortableRecord(ref="o/r#100", control={"assignee": "you", "b": [1, 2]}))
    changed = decisions_identity(host)
    assert changed not in (first, fold({}))
    assert changed == read_every_record(ledger_dir)
    write_behind_the_index(ledger, PortableRecord(ref="o/r#101", session={"id": "s2"}))
    reads = ledger.counters.reads
    behind = decisions_identity(host)
    assert ledger.counters.reads - reads == 1  # only the changed file
    assert behind not in (first, changed)
    assert behind == read_every_record(ledger_dir)

    # (d) a poll-only change does not move it, on a decision record or a poll-only one
    ledger.write(PortableRecord(ref="o/r#101", session={"id": "s2"}, poll=polled(30)))
    write_behind_the_index(ledger, PortableRecord(ref="o/r#5", poll=polled(59)))
    assert decisions_identity(host) == behind
    assert behind == read_every_record(ledger_dir)


def test_a_record_losing_its_last_decision_section_leaves_the_fold(make_host):
    host = make_host()
    empty = decisions_identity(host)
    assert empty == fold({})
    host.ledger.write(PortableRecord(ref="o/r#1", control={"hold": True}))
    assert decisions_identity(host) != empty
    host.ledger.write(PortableRecord(ref="o/r#1", poll=polled(0)))
    assert decisions_identity(host) == empty
    host.ledger.write(PortableRecord(ref="o/r#2", control={"hold": True}))
    assert decisions_identity(host) != empty
    time.sleep(0.02)  # past the file system's coarse clock tick, so the folder's mtime moves
    host.ledger.path_for("o/r#2").unlink()
    assert decisions_identity(host) == empty
