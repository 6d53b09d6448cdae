"""An item's kind and labels in the ledger: kept on the record's ``poll`` section (on
its ``ended`` stamp once it ended and forgot ``poll``), summarised in the index, and
absent (unknown kind, no labels) from a record written before they were kept, which
still reads and rewrites byte for byte."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from hostcore.workitems.index import INDEX_FORMAT, labels_column, labels_of
from hostcore.workitems.items import Closure, Listing, ScopeListing, WorkItem, WorkItemRef
from hostcore.workitems.ledger import Ledger, PollState
from hostcore.workitems.poller import LEDGER_RECHECK_EVERY_CYCLES, Poller
from hostcore.workitems.records import (
    EndedStamp,
    PollSection,
    PortableRecord,
    decode_record,
    encode_record,
)

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
        column = labels_column(labels)
        assert labels_of(column) == labels
    assert labels_column([]) == "" and labels_of("") == []


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
    assert index_rows(again) == {"o/r#3": ("issue", labels_column(["agent"]))}
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


class OneItemProvider:
    """A provider of one scope listing ``items``, whose closure answer is ``closure``."""

    name = "fake"

    def __init__(self) -> None:
        self.items: tuple[WorkItem, ...] = ()
        self.closure_answer = Closure(state="open")

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("o/r#")

    def scope_of(self, ref: WorkItemRef) -> str:
        return "o/r"

    def list_items(self) -> Listing:
        return Listing((ScopeListing(scope="o/r", status="complete", items=self.items),))

    def closure(self, ref: WorkItemRef) -> Closure:
        return self.closure_answer


def label_rows(ledger: Ledger) -> list[tuple[str, int, str]]:
    return ledger.index.read(lambda db: db.execute(
        "SELECT label, ended, kind FROM entry_labels ORDER BY label").fetchall())


def test_an_item_that_ended_keeps_its_kind_and_labels_on_the_stamp_and_in_the_index(
        tmp_path):
    """The poller lists a labelled pull request, then it closes: the close path
    forgets ``poll``, and the record's ``ended`` stamp and the index still say what it
    was, so an ended item is found by kind and by label."""
    ledger = Ledger(tmp_path / "ledger")
    provider = OneItemProvider()
    provider.items = (WorkItem(ref=WorkItemRef("o/r#7"), kind="pull_request",
                               updated_at="u1", labels=("agent", "Bug")),)
    now = [datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)]
    poller = Poller(ledger, [provider], dispatch=lambda event: 0, emit=lambda *a, **k: None,
                    interval=lambda: 60.0, clock=lambda: now[0])
    poller.cycle()
    assert index_rows(ledger)["o/r#7"] == ("pull_request", labels_column(["agent", "Bug"]))

    # Unlisted past the recheck window, it is asked, and answers merged.
    provider.items = ()
    provider.closure_answer = Closure(state="merged")
    now[0] += timedelta(seconds=60.0 * LEDGER_RECHECK_EVERY_CYCLES + 3600)
    assert poller.cycle()[0].closures == 1
    record = ledger.read("o/r#7")
    assert record is not None and record.poll is None and record.ended is not None
    assert (record.ended.kind, record.ended.labels) == ("pull_request", ["agent", "Bug"])
    assert index_rows(ledger)["o/r#7"] == ("pull_request", labels_column(["agent", "Bug"]))
    assert label_rows(ledger) == [("agent", 1, "pull_request"), ("bug", 1, "pull_request")]
    # Derived again from the file alone, the index says the same.
    ledger.index.rebuild()
    assert label_rows(ledger) == [("agent", 1, "pull_request"), ("bug", 1, "pull_request")]
    ledger.close()


def test_forgetting_poll_moves_kind_and_labels_onto_a_stamp_made_without_them(tmp_path):
    """A close path the previous version stamped and was stopped before forgetting:
    the stamp has no kind or labels, ``poll`` still has them. The forget that
    finishes it keeps them on the stamp; a stamp that has its own keeps those."""
    ledger = Ledger(tmp_path / "ledger")
    poll = PollSection(last_polled_at="2026-06-01T12:00:00Z", kind="issue", labels=["agent"])
    ledger.write(PortableRecord(ref="o/r#8", poll=poll,
                                ended=EndedStamp(at="2026-06-01T12:00:00Z", state="closed")))
    ledger.write(PortableRecord(ref="o/r#9", poll=poll, ended=EndedStamp(
        at="2026-06-01T12:00:00Z", state="closed", kind="pull_request", labels=["x"])))
    state = PollState(ledger)
    state.forget("o/r#8")
    state.forget("o/r#9")
    eight, nine = ledger.read("o/r#8"), ledger.read("o/r#9")
    assert eight is not None and eight.ended is not None and eight.poll is None
    assert (eight.ended.kind, eight.ended.labels) == ("issue", ["agent"])
    assert nine is not None and nine.ended is not None
    assert (nine.ended.kind, nine.ended.labels) == ("pull_request", ["x"])
    assert index_rows(ledger)["o/r#8"] == ("issue", labels_column(["agent"]))
    ledger.close()


def test_an_ended_stamp_from_before_kinds_were_kept_reads_unknown_and_rewrites_unchanged():
    old = b'{"ref":"o/r#1","ended":{"at":"2026-06-01T12:00:00Z","state":"closed"}}'
    record = decode_record(old, what="old")
    assert record.ended is not None
    assert (record.ended.kind, record.ended.labels) == ("", [])
    assert encode_record(record) == old
