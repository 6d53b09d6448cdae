"""An item's kind and labels in the ledger: kept on the record's ``poll`` section,
summarised in the index, and absent (unknown kind, no labels) from a record written
before they were kept, which still reads and rewrites byte for byte."""

from __future__ import annotations

import sqlite3

from hostcore.workitems.index import INDEX_FORMAT, labels_column, labels_of
from hostcore.workitems.ledger import Ledger
from hostcore.workitems.records import PollSection, PortableRecord, decode_record, encode_record

OLD_RECORD = (b'{"ref":"o/r#1","poll":{"lastPolledAt":"2026-06-01T12:00:00Z",'
              b'"updatedAt":"2026-05-31T17:02:11Z"}}')


def index_rows(ledger: Ledger) -> dict[str, tuple[str, str]]:
    return ledger.index.read(lambda db: {
        ref: (kind, labels) for ref, kind, labels in
        db.execute("SELECT ref, kind, labels FROM entries")})


def test_a_record_without_kind_or_labels_reads_as_unknown_and_is_written_back_unchanged():
    record = decode_record(OLD_RECORD, what="old")
    assert record.poll is not None
    assert record.poll.kind == "" and record.poll.labels == []
    assert b"kind" not in encode_record(record) and b"labels" not in encode_record(record)
    assert decode_record(encode_record(record), what="again") == record


def test_kind_and_labels_round_trip_through_the_record_and_the_index(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#2", poll=PollSection(
        last_polled_at="2026-06-01T12:00:00Z", kind="pull_request", labels=["agent", "Bug"])))
    ledger.path_for("o/r#1").write_bytes(OLD_RECORD)  # as the previous version wrote it
    read = ledger.read("o/r#2")
    assert read is not None and read.poll is not None
    assert (read.poll.kind, read.poll.labels) == ("pull_request", ["agent", "Bug"])
    rows = index_rows(ledger)
    assert rows["o/r#1"] == ("", "")
    assert rows["o/r#2"][0] == "pull_request" and labels_of(rows["o/r#2"][1]) == ["agent", "Bug"]
    ledger.close()


def test_the_labels_column_keeps_every_label_whole_empty_names_included():
    for labels in ([], ["a"], ["agent", "Bug"], ["", "x"], ["with space", "ü"]):
        column = labels_column(PollSection(labels=labels))
        assert labels_of(column) == labels
    assert labels_column(None) == "" and labels_of("") == []


def test_an_index_of_the_format_before_kinds_is_rebuilt_with_them(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#3", poll=PollSection(
        last_polled_at="2026-06-01T12:00:00Z", kind="issue", labels=["agent"])))
    ledger.close()
    # What the previous version left: format 5, no kind or labels column.
    with sqlite3.connect(ledger.index_path) as db:
        db.execute("DROP TRIGGER entries_gone")
        db.execute("DROP TABLE entry_labels")
        db.execute("DROP INDEX entries_open_kind")
        db.execute("ALTER TABLE entries DROP COLUMN labels")
        db.execute("ALTER TABLE entries DROP COLUMN kind")
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(INDEX_FORMAT - 1),))
    events: list[tuple[str, dict[str, object]]] = []
    again = Ledger(tmp_path / "ledger",
                   on_event=lambda name, **attrs: events.append((name, attrs)))
    assert index_rows(again) == {"o/r#3": ("issue", labels_column(PollSection(
        labels=["agent"])))}
    assert events == [("ledger.index_rebuilt", {"records": 1, "malformed": 0,
                                                "reason": "format"})]
    assert again.index.read(lambda db: db.execute(
        "SELECT label, ended, scope, kind FROM entry_labels").fetchall()) == [
            ("agent", 0, "o/r", "issue")]
    again.close()


def test_the_label_table_follows_each_record_folded_and_leaves_with_it(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#4", poll=PollSection(
        last_polled_at="2026-06-01T12:00:00Z", kind="issue", labels=["Agent", "Bug"])))
    folded = "SELECT label FROM entry_labels ORDER BY label"
    assert [r[0] for r in ledger.index.read(lambda db: db.execute(folded).fetchall())] == [
        "agent", "bug"]
    ledger.write(PortableRecord(ref="o/r#4", poll=PollSection(
        last_polled_at="2026-06-01T12:00:00Z", kind="issue", labels=["agent"])))
    assert [r[0] for r in ledger.index.read(lambda db: db.execute(folded).fetchall())] == [
        "agent"]
    ledger.path_for("o/r#4").unlink()  # gone behind the index: the next use notices
    assert ledger.index.read(lambda db: db.execute(folded).fetchall()) == []
    ledger.close()
