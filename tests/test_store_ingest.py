"""The built-in ingest worker: sources read since their own cursor, appended with it;
one batch at a time, staged before the store's write lock is taken and committed
with its cursor before the next is read."""

from __future__ import annotations

import logging
import sqlite3

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


# -- one batch at a time: staged, stored, then the next read ----------------------


def committed_rows(path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]


def test_each_batch_is_committed_before_the_next_is_read(make_host, tmp_path):
    seen: dict[str | None, int] = {}
    source = CountingSource("a", 6, 2,
                            on_read=lambda cursor: seen.update(
                                {cursor: committed_rows(host.store.path)}))
    host = make_host(plugin(source), root=tmp_path / "root")
    host.store.source_cursor("a")  # the store file exists
    assert host.tick().ok
    # Each read sees every batch before it committed, with its cursor.
    assert seen == {None: 0, "2": 2, "4": 4}
    assert host.store.source_cursor("a") == "6"


def test_a_batch_is_staged_before_the_store_write_lock_is_taken(make_host, monkeypatch):
    from hostcore.evidence.store import Store

    locked_while_staging: list[bool] = []
    real_stage = Store.stage

    def stage(self, rows):
        # Another process could take the write lock now: the step holds none.
        other = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.rollback()
            locked_while_staging.append(False)
        except sqlite3.OperationalError:
            locked_while_staging.append(True)
        finally:
            other.close()
        return real_stage(self, rows)

    monkeypatch.setattr(Store, "stage", stage)
    host = make_host(plugin(CountingSource("a", 6, 2)))
    host.store.source_cursor("a")  # the store file exists
    assert host.tick().ok
    assert locked_while_staging == [False] * 3
    assert host.store.partitions()["a"].row_count == 6


def test_a_refused_batch_stops_its_source_and_the_others_go_on(make_host):
    bad = CountingSource("bad", 8, 2, bad_from=2)
    good = CountingSource("good", 4, 2)
    host = make_host(plugin(bad, good))
    report = host.tick()
    (step,) = report.failed
    assert "'bad' (bad_batch: RecordError)" in step.error
    # The refused batch (rows 2-3) is the source's last read this tick: its cursor
    # stays after the batch stored before it, and nothing after it is read.
    assert bad.cursors == [None, "2"]
    assert host.store.source_cursor("bad") == "2"
    assert host.store.partitions()["bad"].row_count == 2
    assert host.store.partitions()["good"].row_count == 4
    assert host.store.source_health()["bad"].last_error == "bad_batch: RecordError"
    # The next tick starts again after the last batch stored.
    host.tick()
    assert bad.cursors[2] == "2"


def test_a_large_backlog_is_read_on_watched_threads_and_stored_by_the_step_alone(make_host):
    import threading

    source = CountingSource("a", 12_000, 5_000)
    host = make_host(plugin(source))
    before = threading.active_count()
    threads: list[tuple[int, str]] = []
    source.on_read = lambda cursor: threads.append(
        (threading.active_count(), threading.current_thread().name))
    assert host.tick().ok
    # Three batches of thousands of rows: each read on a watched thread of its own
    # beside the step's (the tick runs each step on a thread of its own), no
    # storing thread beside them, and no thread left after it.
    assert threads == [(before + 2, "hostcore-step-source-a")] * 3
    assert threading.active_count() == before
    assert host.store.partitions()["a"].row_count == 12_000
