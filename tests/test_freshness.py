"""The per-process staleness tracker: nothing on first read, each change once."""

from __future__ import annotations

import threading

from hostcore.export.freshness import Freshness
from hostcore.export.ref import Ref
from hostcore.export.refcache import RefCache


class Feed:
    def __init__(self, ref: Ref) -> None:
        self.ref = ref

    def __call__(self) -> Ref:
        return self.ref


def test_first_read_reports_nothing_even_when_governed():
    tracker = Freshness(Feed(Ref(content=3, context="c1", terms="t1")))
    assert tracker.check() == []


def test_a_change_is_reported_once_to_the_first_read_that_spans_it():
    feed = Feed(Ref(context="c1", terms="t1", decisions="d1"))
    tracker = Freshness(feed)
    tracker.check()
    feed.ref = Ref(context="c2", terms="t1", decisions="d2")
    assert tracker.check() == ["context", "decisions"]
    assert tracker.check() == []
    assert tracker.check() == []


def test_content_traffic_alone_is_not_reported():
    feed = Feed(Ref(content=1, context="c1"))
    tracker = Freshness(feed)
    tracker.check()
    feed.ref = Ref(content=500, context="c1")
    assert tracker.check() == []


def test_silent_when_the_baseline_has_no_identities():
    feed = Feed(Ref(content=10))
    tracker = Freshness(feed)
    tracker.check()
    feed.ref = Ref(content=11, context="c1", terms="t1")
    assert tracker.check() == []  # the first identities are not a change
    feed.ref = Ref(content=11, context="c2", terms="t1")
    assert tracker.check() == ["context"]


def test_each_tracker_keeps_its_own_baseline():
    feed = Feed(Ref(terms="t1"))
    early, late = Freshness(feed), Freshness(feed)
    early.check()
    feed.ref = Ref(terms="t2")
    late.check()
    assert early.check() == ["terms"]
    assert late.check() == []


def test_concurrent_checks_report_a_change_exactly_once():
    feed = Feed(Ref(context="c1"))
    tracker = Freshness(feed)
    tracker.check()
    feed.ref = Ref(context="c2")
    reports: list[list[str]] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        reports.append(tracker.check())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(reports) == [[]] * 7 + [["context"]]


def test_observing_reads_the_ref_cache_on_disk(tmp_path):
    cache = RefCache(tmp_path)
    tracker = Freshness.observing(tmp_path)
    assert tracker.check() == []  # no file yet: nothing to report
    cached = cache.load("dir:/a")
    cached.record("main", Ref(content=5, context="c1"))
    cache.save(cached)
    assert tracker.check() == []  # first identities seen: not a change
    cached.record("main", Ref(content=9, context="c2"))
    cache.save(cached)
    assert tracker.check() == ["context"]
    assert tracker.check() == []


def test_host_exposes_one_tracker_over_its_own_ref_cache(make_host):
    host = make_host()
    assert host.freshness is host.freshness
    assert host.freshness.check() == []
    cache = RefCache(host.root)
    cached = cache.load("dir:/a")
    cached.record("main", Ref(context="c1", decisions="d1"))
    cache.save(cached)
    assert host.freshness.check() == []
    cached.record("main", Ref(context="c1", decisions="d2"))
    cache.save(cached)
    assert host.freshness.check() == ["decisions"]
