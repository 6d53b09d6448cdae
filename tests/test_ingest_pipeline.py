"""The ingest step stores a batch on a thread of its own while it reads the next; the
order, the one transaction per batch and the failure rules stay those of one batch
at a time."""

from __future__ import annotations

import sqlite3
import sys

import pytest

import hostcore.evidence.plugin as ingest_plugin
from hostcore.evidence.plugin import STORE_SWITCH_INTERVAL
from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.markers import hookimpl


class Paged:
    """Rows 0..n-1, ``per_read`` a batch; ``on_read(cursor)`` runs at the start of
    each read. ``bad_from`` makes the batch starting there hold a non-row."""

    def __init__(self, name: str, n: int, per_read: int, *, bad_from: int | None = None,
                 on_read=None) -> None:
        self.name = name
        self.n = n
        self.per_read = per_read
        self.bad_from = bad_from
        self.on_read = on_read
        self.cursors: list[str | None] = []

    def read(self, cursor):
        self.cursors.append(cursor)
        if self.on_read is not None:
            self.on_read(cursor)
        start = int(cursor or 0)
        stop = min(self.n, start + self.per_read)
        rows: list[object] = [EvidenceRow(partition=self.name, source_id=self.name, key=str(i))
                              for i in range(start, stop)]
        if start == self.bad_from:
            rows.append("not a row")
        return SourceBatch(rows, str(stop), more=stop < self.n)  # type: ignore[arg-type]


def plugin(*sources):
    class Plugin:
        @hookimpl
        def hostcore_sources(self, host):
            return sources

    return Plugin()


@pytest.fixture
def small_batches_behind(monkeypatch):
    """These sources hand out batches of two rows: store those on the writer too."""
    monkeypatch.setattr(ingest_plugin, "BACKGROUND_MIN_ROWS", 1)


def committed_rows(path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]


def test_the_next_batch_is_read_while_the_previous_one_waits_to_be_stored(
        make_host, tmp_path, small_batches_behind):
    seen: dict[str | None, int] = {}
    blocker: list[sqlite3.Connection] = []

    def on_read(cursor):
        if cursor == "2":  # batch one is in the writer's hands, held up by the lock below
            seen[cursor] = committed_rows(host.store.path)
            blocker.pop().rollback()

    source = Paged("a", 6, 2, on_read=on_read)
    host = make_host(plugin(source), root=tmp_path / "root")
    host.store.source_cursor("a")  # the store file exists
    lock = sqlite3.connect(host.store.path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another writer: the first batch must wait for it
    blocker.append(lock)
    report = host.tick()
    assert report.ok, report.failed
    assert seen == {"2": 0}, "the second read ran while the first batch was not stored yet"
    assert source.cursors == [None, "2", "4"]
    assert committed_rows(host.store.path) == 6
    assert host.store.source_cursor("a") == "6"


def test_a_batch_refused_behind_the_next_read_drops_that_read_and_others_go_on(
        make_host, small_batches_behind):
    bad = Paged("bad", 8, 2, bad_from=2)
    good = Paged("good", 2, 2)
    host = make_host(plugin(bad, good))
    report = host.tick()
    (step,) = report.failed
    assert "'bad' (bad_batch: RecordError)" in step.error
    # Batch 3 was read while batch 2 was being refused: dropped, never stored.
    assert bad.cursors == [None, "2", "4"]
    assert host.store.source_cursor("bad") == "2"
    assert host.store.partitions()["bad"].row_count == 2
    assert host.store.partitions()["good"].row_count == 2
    assert host.store.source_health()["bad"].last_error == "bad_batch: RecordError"
    # The next tick starts again after the last batch stored.
    host.tick()
    assert bad.cursors[3] == "2"


def test_the_thread_switch_interval_is_lowered_only_while_batches_are_stored(
        make_host, small_batches_behind):
    before = sys.getswitchinterval()
    during: list[float] = []
    source = Paged("a", 4, 2, on_read=lambda cursor: during.append(sys.getswitchinterval()))
    host = make_host(plugin(source))
    assert host.tick().ok
    assert during[0] == before
    assert during[1] == pytest.approx(min(before, STORE_SWITCH_INTERVAL))
    assert sys.getswitchinterval() == before


def test_a_quiet_step_stores_at_once_and_starts_no_thread(make_host):
    import threading

    source = Paged("a", 6, 2)  # batches far under BACKGROUND_MIN_ROWS
    host = make_host(plugin(source))
    before = threading.active_count()
    threads: list[int] = []
    source.on_read = lambda cursor: threads.append(threading.active_count())
    assert host.tick().ok and host.tick().ok
    assert threads == [before] * 4  # three batches, then an idle read
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
