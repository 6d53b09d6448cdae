"""The ledger's archive: ended records leave ``portable/`` and stay readable through
the Ledger (read, update, iter_records, decisions, status); nothing is archived or
deleted on doubt; and a process SIGKILLed anywhere in a move loses and duplicates
nothing."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hostcore.errors import RecordError
from hostcore.export.ref import fold
from hostcore.workitems.items import Closure, Listing, ScopeListing, WorkItem, WorkItemRef
from hostcore.workitems.ledger import (
    ARCHIVE_FILE,
    EndedStamp,
    Ledger,
    PollSection,
    PortableRecord,
    encode_record,
)
from hostcore.workitems.poller import ARCHIVE_AFTER_CYCLES, Poller

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
INTERVAL = 60.0
LATER = "2027-01-01T00:00:00Z"


def ended(n: int, at: str = "2026-01-01T00:00:00Z", **sections: object) -> PortableRecord:
    return PortableRecord(ref=f"o/r#{n}", ended=EndedStamp(
        at=at, state="closed", state_reason="completed", closed_at=at, closed_by="octocat"),
        **sections)  # type: ignore[arg-type]


def plant(folder: Path, records: list[PortableRecord]) -> Ledger:
    """Records written as files, the index derived from them (as after an upgrade)."""
    ledger = Ledger(folder)
    ledger.portable.mkdir(parents=True, exist_ok=True)
    for record in records:
        ledger.path_for(record.ref).write_bytes(encode_record(record))
    return ledger


def live_files(ledger: Ledger) -> int:
    return sum(1 for name in os.listdir(ledger.portable) if name.endswith(".json"))


def test_archived_records_read_back_exactly_through_every_ledger_api(tmp_path):
    records = [ended(n, session={"id": f"s{n}"}) for n in range(30)]
    records += [PortableRecord(ref=f"o/r#{n}", poll=PollSection(
        last_polled_at="2026-05-01T00:00:00Z")) for n in range(30, 40)]
    ledger = plant(tmp_path / "ledger", records)
    before_status = ledger.status()
    before_members = ledger.decision_members()
    assert ledger.archive_ended(LATER).archived == 30
    assert live_files(ledger) == 10  # the live folder holds only what a cycle works on
    again = Ledger(tmp_path / "ledger")  # another process
    for record in records:
        assert again.read(record.ref) == record
    assert sorted(ref for ref, _ in again.iter_records()) == sorted(r.ref for r in records)
    assert again.decision_members() == before_members
    assert fold(again.decision_members()) == fold(before_members)  # the export's identity
    assert again.status() == {**before_status, "archived": 30}
    assert again.entry("o/r#3") is None and again.tracked() == []


def test_only_records_ended_before_the_cutoff_with_poll_forgotten_are_archived(tmp_path):
    ledger = plant(tmp_path / "ledger", [
        ended(1, at="2026-01-01T00:00:00Z"),
        ended(2, at="2026-05-31T00:00:00Z"),                     # too recent
        ended(3, poll=PollSection(last_polled_at="2026-01-01T00:00:00Z")),  # mid close path
        PortableRecord(ref="o/r#4", session={"id": "s"}),       # not ended
    ])
    done = ledger.archive_ended("2026-03-01T00:00:00Z")
    assert (done.archived, done.skipped) == (1, 0)
    assert not ledger.path_for("o/r#1").exists()
    assert all(ledger.path_for(f"o/r#{n}").exists() for n in (2, 3, 4))


def test_a_record_that_changed_behind_the_index_is_left_live_and_counted(tmp_path):
    ledger = plant(tmp_path / "ledger", [ended(1), ended(2)])
    ledger.status()  # the index takes in both files
    time.sleep(0.02)
    # Rewritten in place behind the index (by hand): the folder's mtime does not move, so
    # the index still describes the old version.
    ledger.path_for("o/r#2").write_bytes(encode_record(ended(2, graph={"edited": True})))
    done = ledger.archive_ended(LATER)
    assert (done.archived, done.skipped) == (1, 1)
    assert ledger.read("o/r#2") == ended(2, graph={"edited": True})


def test_updating_an_archived_record_brings_it_back_live_and_drops_the_copy(tmp_path):
    ledger = plant(tmp_path / "ledger", [ended(1), ended(2)])
    ledger.archive_ended(LATER)
    ledger.update("o/r#1", lambda r: PortableRecord(ref=r.ref, ended=r.ended,
                                                    session={"id": "late"}))
    assert ledger.path_for("o/r#1").exists()
    assert ledger.archive.get("o/r#1") is None
    assert ledger.read("o/r#1").session == {"id": "late"}
    assert ledger.status()["archived"] == 1 and ledger.status()["records"] == 2


class Lister:
    name = "lister"

    def __init__(self, *refs: str) -> None:
        self.refs = refs

    def owns(self, ref: WorkItemRef) -> bool:
        return True

    def scope_of(self, ref: WorkItemRef) -> str:
        return "o/r"

    def list_items(self) -> Listing:
        items = tuple(WorkItem(ref=WorkItemRef(r), updated_at="u2") for r in self.refs)
        return Listing((ScopeListing(scope="o/r", status="complete", items=items),))

    def closure(self, ref: WorkItemRef) -> Closure:
        return Closure(state="open")


def test_the_poll_cycle_archives_old_ended_records_and_reopens_one_listed_again(tmp_path):
    old = (NOW - timedelta(seconds=ARCHIVE_AFTER_CYCLES * INTERVAL + 60)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    recent = (NOW - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ledger = plant(tmp_path / "ledger",
                   [ended(n, at=old) for n in range(5)] + [ended(9, at=recent)])
    events: list[tuple[str, dict[str, object]]] = []
    delivered: list[str] = []

    def poller(provider: Lister) -> Poller:
        return Poller(ledger, [provider], dispatch=lambda e: delivered.append(e.kind) or 0,
                      emit=lambda name, **a: events.append((name, a)),
                      interval=lambda: INTERVAL, clock=lambda: NOW)

    poller(Lister()).cycle()
    assert ("ledger.archived", {"archived": 5, "skipped": 0, "failed": False}) in events
    assert live_files(ledger) == 1 and ledger.path_for("o/r#9").exists()
    # The item opens again: it is announced and lives in portable/ without its stamp.
    poller(Lister("o/r#2")).cycle()
    assert delivered == ["opened"]
    record = ledger.read("o/r#2")
    assert record is not None and record.ended is None and record.poll is not None
    assert ledger.path_for("o/r#2").exists() and ledger.archive.get("o/r#2") is None
    assert ledger.status()["archived"] == 4


def test_an_archive_that_does_not_read_is_never_replaced_and_nothing_moves(tmp_path):
    ledger = plant(tmp_path / "ledger", [ended(1), ended(2)])
    ledger.archive_ended(LATER, limit=1)
    ledger.close()
    path = tmp_path / "ledger" / ARCHIVE_FILE
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'format'")  # a newer hostcore's
    db.commit()
    db.close()
    kept = path.read_bytes()
    again = Ledger(tmp_path / "ledger")
    with pytest.raises(RecordError, match="archive format"):
        again.archive_ended(LATER)
    assert again.path_for("o/r#2").exists()  # the live record stayed
    assert again.status()["archive_unreadable"] == 1
    with pytest.raises(RecordError):
        again.read("o/r#1")  # archived, unreadable: an error, never "no such record"
    assert path.read_bytes() == kept


def test_an_archived_record_costs_at_most_a_kibibyte_on_disk(tmp_path):
    count = 2_000
    ledger = plant(tmp_path / "ledger", [ended(n, graph={"parent": f"o/r#{n // 10}"})
                                         for n in range(count)])
    assert ledger.archive_ended(LATER).archived == count
    ledger.close()
    size = sum(p.stat().st_size for p in (tmp_path / "ledger").glob(f"{ARCHIVE_FILE}*"))
    assert size / count <= 1024


# -- SIGKILL during a move ---------------------------------------------------------------

CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from hostcore.workitems import archive, index, ledger as ledger_module

    folder, point = Path(sys.argv[1]), sys.argv[2]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "after-commit":
        put = archive.Archive.put
        def put_then_die(self, records):
            put(self, records)
            die()
        archive.Archive.put = put_then_die
    elif point == "mid-unlink":
        unlink, calls = os.unlink, []
        def unlink_then_die(path, *args, **kwargs):
            unlink(path, *args, **kwargs)
            calls.append(path)
            if len(calls) == 7:
                die()
        ledger_module.os.unlink = unlink_then_die
    elif point == "before-index":
        def removed_then_die(self, slugs):
            die()
        index.LedgerIndex.removed = removed_then_die
    elif point == "mid-commit":
        put = archive.Archive.put
        def commit_dies(self, records):
            db = self._writable()
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
                           [(r.ref, r.ended_at, r.decision, r.data) for r in records])
            die()
        archive.Archive.put = commit_dies

    elif point == "write-back":
        def discard_dies(self, ref):
            die()
        archive.Archive.discard = discard_dies

    led = ledger_module.Ledger(folder)
    print("started", flush=True)
    if point == "write-back":  # an archived item listed open again, killed half way
        led.update("o/r#1", lambda r: ledger_module.PortableRecord(
            ref=r.ref, poll=ledger_module.PollSection(last_polled_at="2026-06-01T00:00:00Z")))
    while led.archive_ended("2027-01-01T00:00:00Z", limit=25).archived:
        pass
    print("done", flush=True)
""")


def run_child(folder: Path, point: str, kill_after: float | None = None) -> int:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), point],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if kill_after is not None:
        assert proc.stdout is not None
        proc.stdout.readline()  # started: the ledger is open
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    return proc.returncode


def assert_nothing_lost_or_doubled(folder: Path, records: dict[str, PortableRecord]) -> None:
    """Every record readable as written, each seen once, counts exact: by a read-only
    reader (what ``hostcore status`` sees, nothing repaired) and by a writer."""
    for read_only in (True, False):
        ledger = Ledger(folder, read_only=read_only)
        seen = [ref for ref, _ in ledger.iter_records()]
        assert sorted(seen) == sorted(records)
        for ref, record in records.items():
            assert ledger.read(ref) == record
        status = ledger.status()
        assert status["records"] == len(records)
        assert status["ended"] == sum(1 for r in records.values() if r.ended is not None)
        ledger.close()


@pytest.mark.parametrize("point", ["mid-commit", "after-commit", "mid-unlink",
                                   "before-index"])
def test_a_process_killed_at_each_step_of_a_move_loses_and_duplicates_nothing(
        tmp_path, point):
    folder = tmp_path / "ledger"
    records = {r.ref: r for r in [ended(n, session={"id": f"s{n}"}) for n in range(60)]}
    records["o/r#live"] = PortableRecord(ref="o/r#live", poll=PollSection(
        last_polled_at="2026-05-01T00:00:00Z"))
    plant(folder, list(records.values())).close()
    assert run_child(folder, point) == -signal.SIGKILL
    assert_nothing_lost_or_doubled(folder, records)
    assert run_child(folder, "none") == 0  # the next pass finishes the move
    assert_nothing_lost_or_doubled(folder, records)
    ledger = Ledger(folder)
    assert live_files(ledger) == 1 and ledger.status()["archived"] == 60
    assert ledger.archive.pending() == []  # nothing left that a live file could shadow


def test_a_process_killed_writing_an_archived_record_back_counts_it_once(tmp_path):
    folder = tmp_path / "ledger"
    records = {r.ref: r for r in [ended(n) for n in range(10)]}
    plant(folder, list(records.values())).archive_ended(LATER)
    assert run_child(folder, "write-back") == -signal.SIGKILL
    records["o/r#1"] = PortableRecord(ref="o/r#1", poll=PollSection(  # the live file won
        last_polled_at="2026-06-01T00:00:00Z"))
    assert_nothing_lost_or_doubled(folder, records)
    assert Ledger(folder, read_only=True).status()["archived"] == 9
    assert run_child(folder, "none") == 0  # the next pass drops the stale copy
    assert_nothing_lost_or_doubled(folder, records)
    ledger = Ledger(folder)
    assert ledger.archive.get("o/r#1") is None and ledger.archive.pending() == []


def test_a_process_killed_at_random_moments_while_archiving_loses_and_duplicates_nothing(
        tmp_path):
    folder = tmp_path / "ledger"
    records = {r.ref: r for r in [ended(n, graph={"n": n}) for n in range(400)]}
    plant(folder, list(records.values())).close()
    shuffle = random.Random(25)
    for _ in range(6):
        run_child(folder, "none", kill_after=shuffle.uniform(0.0, 0.3))
        assert_nothing_lost_or_doubled(folder, records)
    assert run_child(folder, "none") == 0
    assert_nothing_lost_or_doubled(folder, records)
    assert Ledger(folder).status()["archived"] == 400


HOT_JOURNAL = textwrap.dedent("""
    import os, signal, sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA cache_size = 1")  # spill pages to the file mid-transaction
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO records VALUES (?, '', NULL, ?)",
                   [(f"x/y#{n}", b"{}" * 200) for n in range(2000)])
    db.execute("UPDATE records SET data = x'00' WHERE ref LIKE 'o/r#%'")
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_read_only_reader_after_a_writer_died_mid_commit_reads_the_last_commit(tmp_path):
    folder = tmp_path / "ledger"
    records = {r.ref: r for r in [ended(n) for n in range(20)]}
    plant(folder, list(records.values())).archive_ended(LATER)
    path = folder / ARCHIVE_FILE
    died = subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(path)])
    assert died.returncode == -signal.SIGKILL
    journal = Path(f"{path}-journal")
    assert journal.stat().st_size > 0  # a hot journal: only a writer may roll it back
    kept = (path.read_bytes(), journal.read_bytes())
    assert_nothing_lost_or_doubled_read_only(folder, records)
    assert (path.read_bytes(), journal.read_bytes()) == kept  # nothing written
    assert_nothing_lost_or_doubled(folder, records)  # and a writer rolls it back


def test_an_archive_whose_creation_was_killed_before_its_schema_holds_nothing(tmp_path):
    # What a writer killed between creating the file and committing its schema leaves:
    # an empty SQLite file. A reader (status) sees no records, not an unreadable archive.
    folder = tmp_path / "ledger"
    records = {r.ref: r for r in [ended(n) for n in range(5)]}
    plant(folder, list(records.values())).close()
    (folder / ARCHIVE_FILE).touch(mode=0o600)
    assert_nothing_lost_or_doubled(folder, records)
    assert (folder / ARCHIVE_FILE).stat().st_size > 0  # the writer made its schema


def assert_nothing_lost_or_doubled_read_only(folder: Path,
                                            records: dict[str, PortableRecord]) -> None:
    ledger = Ledger(folder, read_only=True)
    assert sorted(ref for ref, _ in ledger.iter_records()) == sorted(records)
    assert all(ledger.read(ref) == record for ref, record in records.items())
    assert ledger.status()["archived"] == len(records)
    ledger.close()


def test_an_archive_that_cannot_be_written_leaves_records_live_and_the_cycle_whole(tmp_path):
    old = (NOW - timedelta(seconds=ARCHIVE_AFTER_CYCLES * INTERVAL + 60)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    ledger = plant(tmp_path / "ledger", [ended(n, at=old) for n in range(3)])
    (tmp_path / "ledger" / ARCHIVE_FILE).write_bytes(b"not a database" * 100)
    events: list[tuple[str, dict[str, object]]] = []
    delivered: list[str] = []
    poller = Poller(ledger, [Lister("o/r#new")],
                    dispatch=lambda e: delivered.append(e.kind) or 0,
                    emit=lambda name, **a: events.append((name, a)),
                    interval=lambda: INTERVAL, clock=lambda: NOW)
    (summary,) = poller.cycle()
    assert delivered == ["opened"] and summary.new == 1 and not summary.ledger_error
    assert ("ledger.archived", {"archived": 0, "skipped": 0, "failed": True}) in events
    assert all(ledger.path_for(f"o/r#{n}").exists() for n in range(3))
    assert (tmp_path / "ledger" / ARCHIVE_FILE).read_bytes() == b"not a database" * 100


def test_a_record_written_while_the_archive_was_unreadable_counts_once_when_it_reads_again(
        tmp_path):
    ledger = plant(tmp_path / "ledger", [ended(n) for n in range(4)])
    ledger.archive_ended(LATER)
    ledger.close()
    path = tmp_path / "ledger" / ARCHIVE_FILE
    good = path.read_bytes()
    path.write_bytes(b"not a database" * 100)  # a disk error, a bad restore
    poller = Poller(Ledger(tmp_path / "ledger"), [Lister("o/r#1")], dispatch=lambda e: 0,
                    emit=lambda *a, **k: None, interval=lambda: INTERVAL, clock=lambda: NOW)
    poller.cycle()
    poller.ledger.close()
    path.write_bytes(good)  # the archive reads again, its copy of o/r#1 unlisted in pending
    again = Ledger(tmp_path / "ledger", read_only=True)
    status = again.status()
    assert (status["records"], status["archived"], status["ledger_only"]) == (4, 3, 1)
    assert again.read("o/r#1").ended is None  # the live record wins
    writer = Ledger(tmp_path / "ledger")
    writer.archive_ended(LATER)  # settles it: the stale copy goes, the live record stays
    assert writer.archive.get("o/r#1") is None and writer.path_for("o/r#1").exists()
    assert writer.status()["records"] == 4 and writer.archive.pending() == []
    assert not (tmp_path / "ledger" / ".archive-unchecked").exists()
