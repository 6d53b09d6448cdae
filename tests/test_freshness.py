"""The per-process staleness tracker: nothing on first read, each change once."""

from __future__ import annotations

import multiprocessing
import threading

from hostcore.export.freshness import Freshness
from hostcore.export.ref import Ref
from hostcore.export.refcache import CACHE_PATH, RefCache


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


def publish(root, ref: Ref, destination: str = "dir:/a") -> None:
    """What an export's contact records: the ref the destination published."""
    cache = RefCache(root)
    cached = cache.load(destination)
    cached.observe("main", ref)
    cache.save(cached)


def test_observing_reads_what_the_destination_published_at_the_last_contact(tmp_path):
    tracker = Freshness.observing(tmp_path)
    assert tracker.check() == []  # no file yet: nothing to report
    publish(tmp_path, Ref(content=5, context="c1"))
    assert tracker.check() == []  # first identities seen: not a change
    publish(tmp_path, Ref(content=9, context="c2"))
    assert tracker.check() == ["context"]
    assert tracker.check() == []


def test_host_exposes_one_tracker_over_its_own_ref_cache(make_host):
    host = make_host()
    assert host.freshness is host.freshness
    assert host.freshness.check() == []
    publish(host.root, Ref(context="c1", decisions="d1"))
    assert host.freshness.check() == []
    publish(host.root, Ref(context="c1", decisions="d2"))
    assert host.freshness.check() == ["decisions"]


def test_a_change_is_reported_once_per_process_not_once_per_host(make_host, tmp_path):
    root = tmp_path / "shared-root"
    first, second = make_host(root=root), make_host(root=root)
    publish(root, Ref(context="c1"))
    assert first.freshness.check() == []
    assert second.freshness.check() == []
    publish(root, Ref(context="c2"))
    assert first.freshness.check() == ["context"]
    assert second.freshness.check() == []  # the process was already told
    assert Freshness.observing(root) is first.freshness
    assert Freshness.observing(make_host().root) is not first.freshness


def test_the_baseline_survives_a_deleted_cache(tmp_path):
    tracker = Freshness.observing(tmp_path)
    publish(tmp_path, Ref(content=3, context="c1", terms="t1"))
    tracker.check()
    (tmp_path / CACHE_PATH).unlink()
    assert tracker.check() == []  # a deleted cache claims nothing; it is not a change
    publish(tmp_path, Ref(content=4, context="c2", terms="t1"))  # the next contact
    assert tracker.check() == ["context"]


def test_a_feed_that_goes_silent_keeps_each_component_it_stops_claiming():
    feed = Feed(Ref(context="c1", decisions="d1"))
    tracker = Freshness(feed)
    tracker.check()
    feed.ref = Ref(decisions="d1")
    assert tracker.check() == []
    feed.ref = Ref(context="c1", decisions="d1")
    assert tracker.check() == []  # back to the value last known: nothing moved


def _first_check_in_child(root: str, queue) -> None:
    queue.put(Freshness.observing(root).check())


def test_a_forked_child_starts_without_the_parents_baseline(tmp_path):
    tracker = Freshness.observing(tmp_path)
    publish(tmp_path, Ref(context="c1"))
    tracker.check()
    publish(tmp_path, Ref(context="c2"))
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_first_check_in_child, args=(str(tmp_path), queue))
    child.start()
    child.join(timeout=60)
    assert queue.get(timeout=5) == []  # the child's first check: nothing to report
    assert tracker.check() == ["context"]  # the parent still reports its own, once


def test_a_move_by_another_writer_is_reported_after_the_exports_next_contact(make_host,
                                                                             tmp_path):
    import json

    import hostcore_directory_destination.plugin as directory_plugin

    from hostcore.evidence.store import EvidenceRow
    from hostcore.export.destinations import select_destination
    from hostcore.export.exporter import Exporter

    outbox = tmp_path / "outbox"
    host = make_host(directory_plugin, config={
        "plugins": {"directory-destination": {"path": str(outbox)}}})
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/w", payload={})])
    Exporter(host, select_destination(host)).run()
    assert host.freshness.check() == []  # the baseline
    published = outbox / "main" / host.store.instance_id / "ref.json"
    published.write_text(json.dumps({**json.loads(published.read_text()), "terms": "e" * 64}))
    assert host.freshness.check() == []  # no contact yet: a check never phones the destination
    Exporter(host, select_destination(host)).run()  # the next contact sees what it publishes
    assert host.freshness.check() == ["terms"]
    assert host.freshness.check() == []
