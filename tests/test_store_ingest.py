"""The built-in ingest worker: sources read since their own cursor, appended with it."""

from __future__ import annotations

import logging

from hostcore.plugin.markers import hookimpl
from hostcore.evidence.store import EvidenceRow, SourceBatch


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
    assert report.steps[0].counts == {"sources": 2, "failed": 0, "skipped": 0, "rows": 5}
    host.tick()
    assert a.cursors == [None, "3"] and b.cursors == [None, "2"]
    host.close()
    again = CountingSource("a", 3)
    make_host(plugin(again), root=tmp_path / "root").tick()
    assert again.cursors == ["3"]


def test_a_source_that_raises_is_reported_and_skipped_and_others_ingest(
        make_host, collected_events, caplog):
    good = CountingSource("good", 2)
    host = make_host(plugin(Raising(), good, BadBatch()))
    with caplog.at_level(logging.WARNING, logger="hostcore.evidence"):
        report = host.tick()
    assert report.ok
    assert report.steps[0].counts == {"sources": 3, "failed": 2, "skipped": 0, "rows": 2}
    assert host.store.partitions()["good"].row_count == 2
    assert host.store.source_cursor("raising") is None
    assert [e.attributes["reason"] for e in collected_events.named("evidence.source_failed")
            ] == ["raised", "bad_batch"]
    assert "'raising'" in caplog.text and "'bad-batch'" in caplog.text
    (ingested,) = collected_events.named("evidence.ingested")
    assert ingested.attributes["failed"] == 2


def test_an_unavailable_source_is_skipped(make_host):
    host = make_host(plugin(Unavailable()))
    assert host.tick().steps[0].counts["skipped"] == 1


def test_a_source_with_more_ready_makes_the_step_pending(make_host):
    source = CountingSource("paged", 5, per_read=2)
    host = make_host(plugin(source))
    assert host.tick().pending
    assert host.tick().pending
    assert not host.tick().pending
    assert host.store.partitions()["paged"].row_count == 5


def test_ingesting_twice_adds_nothing(make_host):
    class Forgetful(CountingSource):
        def read(self, cursor):  # ignores its cursor: re-reads everything
            return super().read(None)

    host = make_host(plugin(Forgetful("f", 4)))
    host.tick()
    host.tick()
    assert host.store.partitions()["f"].row_count == 4
    assert host.store.head_position() == 4
