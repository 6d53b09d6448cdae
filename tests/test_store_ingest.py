"""The built-in ingest worker: sources read since their own cursor, appended with it;
a large batch stored on a thread of its own while the next is read, with the order,
the one transaction per batch and the failure rules of one batch at a time."""

from __future__ import annotations

import logging
import sqlite3
import sys

import pytest

import hostcore.evidence.plugin as ingest_plugin
from hostcore.evidence.plugin import STORE_SWITCH_INTERVAL
from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.markers import hookimpl


class CountingSource:
    """Emits rows 0..n-1 once: its cursor is how many it has handed out.

    ``on_read(cursor)`` runs at the start of each read; ``bad_from`` makes the batch
    starting at that row also hold something that is not a row.
    """

    def __init__(self, name: str, n: int, per_read: int | None = None, *,
                 bad_from: int | None = None, on_read=None) -> None:
        self.name = name
        self.n = n
        self.per_read = per_read or n
        self.bad_from = bad_from
        self.on_read = on_read
        self.cursors: list[str | None] = []

    def read(self, cursor):
        self.cursors.append(cursor)
        if self.on_read is not None:
            self.on_read(cursor)
        start = int(cursor or 0)
        stop = min(self.n, start + self.per_read)
        new: list[object] = [EvidenceRow(partition=self.name, source_id=self.name, key=str(i))
                             for i in range(start, stop)]
        if start == self.bad_from:
            new.append("not a row")
        return SourceBatch(new, str(stop), more=stop < self.n)  # type: ignore[arg-type]


class Raising:
    name = "raising"

    def read(self, cursor):
        raise RuntimeError("transcripts folder exploded")


class BadBatch:
    name = "bad-batch"

    def read(self, cursor):
        return {"rows": [{"partition": "x"}], "cursor": "1"}


class Unavailable:
    name = "unavailable"

    def availability(self):
        return "not installed"

    def read(self, cursor):
        raise AssertionError("an unavailable source is not read")


def plugin(*sources):
    class Plugin:
        @hookimpl
        def hostcore_sources(self, host):
            return sources

    return Plugin()


def test_each_source_is_asked_since_its_own_persisted_cursor(make_host, tmp_path):
    a, b = CountingSource("a", 3), CountingSource("b", 2)
    host = make_host(plugin(a, b), root=tmp_path / "root")
    report = host.tick()
    assert report.ok and report.steps[0].name == "ingest"
    assert report.steps[0].counts == {"sources": 2, "failed": 0, "skipped": 0, "rows": 5,
                                      "lines_skipped": 0}
    host.tick()
    assert a.cursors == [None, "3"] and b.cursors == [None, "2"]
    host.close()
    again = CountingSource("a", 3)
    make_host(plugin(again), root=tmp_path / "root").tick()
    assert again.cursors == ["3"]


def test_a_source_that_raises_is_skipped_others_ingest_and_the_step_fails_naming_it(
        make_host, collected_events, caplog):
    good = CountingSource("good", 2)
    host = make_host(plugin(Raising(), good, BadBatch()))
    with caplog.at_level(logging.WARNING, logger="hostcore.evidence"):
        report = host.tick()
    (step,) = report.failed
    assert step.name == "ingest"
    assert "'raising' (raised: RuntimeError)" in step.error
    assert "'bad-batch' (bad_batch: RecordError)" in step.error
    assert host.store.partitions()["good"].row_count == 2
    assert host.store.source_cursor("raising") is None
    assert [e.attributes["reason"] for e in collected_events.named("evidence.source_failed")
            ] == ["raised", "bad_batch"]
    assert "'raising'" in caplog.text and "'bad-batch'" in caplog.text
    assert "exploded" not in caplog.text, "warnings carry the kind, not the message"
    (ingested,) = collected_events.named("evidence.ingested")
    assert ingested.attributes["failed"] == 2 and ingested.attributes["rows"] == 2
    assert step.counts["rows"] == 2  # the failed step still says what it stored
    assert "rows in 2" in report.summary()


def test_a_failing_source_is_retried_next_tick_and_its_health_says_what_failed(make_host):
    class FailsOnce(CountingSource):
        def read(self, cursor):
            if len(self.cursors) == 0:
                self.cursors.append(cursor)
                raise KeyError("a bad line")
            return super().read(cursor)

    source = FailsOnce("flaky", 3)
    host = make_host(plugin(source))
    assert not host.tick().ok
    health = host.store.source_health()["flaky"]
    assert (health.failures, health.last_error) == (1, "raised: KeyError")
    assert host.tick().ok
    assert source.cursors == [None, None], "the cursor did not move past the failure"
    assert host.store.partitions()["flaky"].row_count == 3
    health = host.store.source_health()["flaky"]
    assert (health.failures, health.last_error) == (0, "raised: KeyError")
    assert health.last_error_at is not None


def test_an_unavailable_source_is_skipped(make_host):
    host = make_host(plugin(Unavailable()))
    assert host.tick().steps[0].counts["skipped"] == 1


def test_a_source_with_more_ready_is_read_again_within_the_step(make_host):
    source = CountingSource("paged", 5, per_read=2)
    host = make_host(plugin(source))
    report = host.tick()
    assert not report.pending
    assert report.steps[0].counts["rows"] == 5
    assert source.cursors == [None, "2", "4"], "one transaction per batch"


def test_a_source_still_ready_after_the_time_slice_makes_the_step_pending(
        make_host, monkeypatch):
    import hostcore.evidence.plugin as evidence_plugin

    monkeypatch.setattr(evidence_plugin, "INGEST_SLICE_SECONDS", 0.0)
    source = CountingSource("paged", 5, per_read=2)
    host = make_host(plugin(source))
    assert host.tick().pending
    assert host.tick().pending
    assert not host.tick().pending
    assert host.store.partitions()["paged"].row_count == 5


def test_an_idle_tick_writes_nothing(make_host):
    source = CountingSource("idle", 2)
    host = make_host(plugin(source))
    host.tick()
    wal = host.store.path.with_name(host.store.path.name + "-wal")
    before = wal.stat().st_size, wal.stat().st_mtime_ns
    host.tick()
    assert (wal.stat().st_size, wal.stat().st_mtime_ns) == before


def test_ingesting_twice_adds_nothing(make_host):
    class Forgetful(CountingSource):
        def read(self, cursor):  # ignores its cursor: re-reads everything
            return super().read(None)

    host = make_host(plugin(Forgetful("f", 4)))
    host.tick()
    host.tick()
    assert host.store.partitions()["f"].row_count == 4
    assert host.store.head_position() == 4


def test_a_nul_in_a_text_field_is_counted_and_skipped_so_no_destination_chokes(tmp_path):
    from hostcore.evidence.store import Store

    store = Store(tmp_path / "store.sqlite3")
    rows = [EvidenceRow(partition="p", source_id="s", session_id="a\0b", payload={}),
            EvidenceRow(partition="p", source_id="s", directory="/w\0x", payload={}),
            EvidenceRow(partition="p", source_id="s", session_id="fine", payload={"t": "a\0"})]
    assert store.append(rows, source="s") == 1  # NUL inside JSON is escaped: kept
    assert store.source_health()["s"].skipped == {"unencodable": 2}


# -- batches stored on a thread of their own while the next is read --------------


@pytest.fixture
def small_batches_behind(monkeypatch):
    """These sources hand out batches of two rows: store those on the writer too."""
    monkeypatch.setattr(ingest_plugin, "BACKGROUND_MIN_ROWS", 1)


def committed_rows(path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]


@pytest.mark.parametrize("rows, held_until", [(6, "2"), (8, "4")])
def test_reading_goes_on_while_batches_wait_to_be_stored(
        make_host, tmp_path, small_batches_behind, rows, held_until):
    # Another writer holds the store until the read from ``held_until``: with two
    # batches in flight at most, the second read and the third run while no batch
    # could be stored yet.
    seen: dict[str | None, int] = {}
    blocker: list[sqlite3.Connection] = []

    def on_read(cursor):
        if cursor is not None and int(cursor) <= int(held_until):
            seen[cursor] = committed_rows(host.store.path)
        if cursor == held_until:
            blocker.pop().rollback()

    source = CountingSource("a", rows, 2, on_read=on_read)
    host = make_host(plugin(source), root=tmp_path / "root")
    host.store.source_cursor("a")  # the store file exists
    # Rolled back by the source, on the step's own thread.
    lock = sqlite3.connect(host.store.path, isolation_level=None, check_same_thread=False)
    lock.execute("BEGIN IMMEDIATE")  # another writer: the first batch must wait for it
    blocker.append(lock)
    report = host.tick()
    assert report.ok, report.failed
    assert seen == {str(n): 0 for n in range(2, int(held_until) + 1, 2)}
    assert source.cursors == [None, *(str(n) for n in range(2, rows, 2))]
    assert committed_rows(host.store.path) == rows
    assert host.store.source_cursor("a") == str(rows)


def test_a_batch_refused_behind_the_next_read_drops_that_read_and_others_go_on(
        make_host, small_batches_behind):
    bad = CountingSource("bad", 8, 2, bad_from=2)
    good = CountingSource("good", 2, 2)
    host = make_host(plugin(bad, good))
    report = host.tick()
    (step,) = report.failed
    assert "'bad' (bad_batch: RecordError)" in step.error
    # Batches 3 and 4 were read while batch 2 waited to be refused (two batches
    # wait for the writer at most): both dropped, never stored, the writer's
    # copy of batch 3 included.
    assert bad.cursors == [None, "2", "4", "6"]
    assert host.store.source_cursor("bad") == "2"
    assert host.store.partitions()["bad"].row_count == 2
    assert host.store.partitions()["good"].row_count == 2
    assert host.store.source_health()["bad"].last_error == "bad_batch: RecordError"
    # The next tick starts again after the last batch stored.
    host.tick()
    assert bad.cursors[4] == "2"


def test_batches_stored_behind_the_reading_are_staged_on_the_reading_thread(
        make_host, monkeypatch, small_batches_behind):
    import threading

    from hostcore.evidence.store import Store

    staged_on: list[str] = []
    real_stage = Store.stage

    def stage(self, rows):
        staged_on.append(threading.current_thread().name)
        return real_stage(self, rows)

    monkeypatch.setattr(Store, "stage", stage)
    host = make_host(plugin(CountingSource("a", 6, 2)))
    assert host.tick().ok
    # Once per batch, by the thread that read it (the step's own): the writer runs
    # little but SQLite.
    assert staged_on == ["hostcore-step-ingest"] * 3
    assert host.store.partitions()["a"].row_count == 6


def test_the_thread_switch_interval_is_lowered_only_while_batches_are_stored(
        make_host, small_batches_behind):
    before = sys.getswitchinterval()
    during: list[float] = []
    source = CountingSource("a", 4, 2,
                            on_read=lambda cursor: during.append(sys.getswitchinterval()))
    host = make_host(plugin(source))
    assert host.tick().ok
    assert during[0] == before
    assert during[1] == pytest.approx(min(before, STORE_SWITCH_INTERVAL))
    assert sys.getswitchinterval() == before


def test_a_quiet_step_stores_at_once_and_starts_no_thread(make_host):
    import threading

    source = CountingSource("a", 6, 2)  # batches far under BACKGROUND_MIN_ROWS
    host = make_host(plugin(source))
    before = threading.active_count()
    threads: list[int] = []
    source.on_read = lambda cursor: threads.append(threading.active_count())
    assert host.tick().ok and host.tick().ok
    # Three batches, then an idle read, on the step's own thread alone.
    assert threads == [before + 1] * 4
    assert host.store.partitions()["a"].row_count == 6


def test_overlapping_steps_of_two_hosts_put_back_the_interval_they_found():
    from hostcore.evidence.plugin import _SwitchInterval

    before = sys.getswitchinterval()
    switching = _SwitchInterval()
    switching.enter()  # host A's step
    switching.enter()  # host B's, in another thread of the same process
    switching.leave()  # A ends first: B is still storing behind its reading
    assert sys.getswitchinterval() == pytest.approx(min(before, STORE_SWITCH_INTERVAL))
    switching.leave()
    assert sys.getswitchinterval() == before


def test_a_small_batch_read_behind_a_refused_one_of_its_source_is_dropped(
        make_host, monkeypatch):
    # The first batch (two rows and a non-row) goes to the writer; the second, one
    # row, would be stored at once: it must wait for the first, and be dropped
    # when that one is refused, or its cursor would skip the refused rows.
    monkeypatch.setattr(ingest_plugin, "BACKGROUND_MIN_ROWS", 3)
    source = CountingSource("a", 3, 2, bad_from=0)
    host = make_host(plugin(source))
    report = host.tick()
    (step,) = report.failed
    assert "'a' (bad_batch: RecordError)" in step.error
    assert source.cursors == [None, "2"]
    assert host.store.source_cursor("a") is None
    assert "a" not in host.store.partitions()
