"""The built-in ingest worker: sources read since their own cursor, appended with it."""

from __future__ import annotations

import logging

from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.markers import hookimpl


class CountingSource:
    """Emits rows 0..n-1 once: its cursor is how many it has handed out."""

    def __init__(self, name: str, n: int, per_read: int | None = None) -> None:
        self.name = name
        self.n = n
        self.per_read = per_read or n
        self.cursors: list[str | None] = []

    def read(self, cursor):
        self.cursors.append(cursor)
        start = int(cursor or 0)
        stop = min(self.n, start + self.per_read)
        new = [EvidenceRow(partition=self.name, source_id=self.name, key=str(i))
               for i in range(start, stop)]
        return SourceBatch(new, str(stop), more=stop < self.n)


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
