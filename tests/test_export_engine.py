"""The export engine against the real directory destination, in one process."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import msgspec
import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import EXPORT_ROW_FIELDS, ExportBatch, ExportRow, apply_governance
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import (
    AdoptRefused,
    Exporter,
    decisions_identity,
    local_governance,
    terms_identity,
)
from hostcore.export.ref import Conflict, Ref, Status, fold
from hostcore.export.refcache import CACHE_PATH, RefCache
from hostcore.plugin.markers import hookimpl
from hostcore.telemetry import EventSpec
from hostcore.workitems.ledger import EndedStamp, PollSection, PortableRecord


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    return tmp_path / "outbox"


@pytest.fixture
def host(make_host, outbox):
    return make_host(directory_plugin,
                     config={"plugins": {"directory-destination": {"path": str(outbox)}}})


def add_rows(host, count: int, directory: str = "/work/a", source: str = "claude") -> None:
    host.store.append(
        EvidenceRow(partition="sessions", source_id=source, directory=directory,
                    ts="2024-05-01T10:00:00Z", payload={"n": i, "dir": directory})
        for i in range(count)
    )


def exported(host) -> list[ExportRow]:
    """The rows the folder holds from ``host``'s store, read back by the destination."""
    return list(select_destination(host).read_rows("main", host.store.instance_id))


def published_file(outbox: Path, host=None) -> Path:
    """The ref file the folder publishes for ``host``'s store (the only origin when None)."""
    if host is not None:
        return outbox / "main" / host.store.instance_id / "ref.json"
    (path,) = outbox.glob("main/*/ref.json")
    return path


def move_destination_context(outbox: Path, value: str = "f" * 64) -> None:
    """What another writer does to the folder: publish a different context."""
    path = published_file(outbox)
    data = json.loads(path.read_text())
    data["context"] = value
    path.write_text(json.dumps(data))


def exporter(host, batch_rows: int = 10) -> Exporter:
    return Exporter(host, select_destination(host), batch_rows=batch_rows)


def test_exports_every_permitted_row_once_in_position_order(host, outbox):
    add_rows(host, 25)
    summary = exporter(host).run()
    # One governance push (no rows) and three of rows.
    assert (summary.rows, summary.batches, summary.position, summary.done) == (25, 4, 25, True)
    assert summary.carried == ["context", "terms", "decisions"]  # first contact sets all three
    rows = exported(host)
    assert [r.position for r in rows] == list(range(1, 26))
    assert msgspec.json.decode(rows[0].payload) == {"n": 0, "dir": "/work/a"}
    # On disk a row is an array in EXPORT_ROW_FIELDS order.
    first_line = next(outbox.glob("main/*/*.jsonl")).read_bytes().split(b"\n")[0]
    assert json.loads(first_line) == [1, "sessions", "claude", "",
                                      "2024-05-01T10:00:00.000000Z", "/work/a", "",
                                      {"n": 0, "dir": "/work/a"}, None]
    again = exporter(host).run()
    assert (again.rows, again.batches, again.carried) == (0, 0, [])
    assert len(exported(host)) == 25


def test_an_export_row_encodes_as_an_array_in_the_documented_order():
    assert tuple(f.name for f in msgspec.structs.fields(ExportRow)) == EXPORT_ROW_FIELDS
    row = ExportRow(7, "p", "src", "sess", "ts", "/d", "git", msgspec.Raw(b'{"a":1}'), "k")
    assert json.loads(msgspec.json.encode(row)) == [7, "p", "src", "sess", "ts", "/d", "git",
                                                    {"a": 1}, "k"]
    documented = "[" + ", ".join(EXPORT_ROW_FIELDS) + "]"
    assert documented in (Path(__file__).parents[1] / "docs" / "freshness.md").read_text()


def test_max_rows_bounds_a_run_and_the_next_run_continues(host, outbox):
    add_rows(host, 25)
    first = exporter(host).run(max_rows=12)
    assert (first.rows, first.done) == (12, False)
    second = exporter(host).run()
    assert (second.rows, second.done) == (13, True)
    assert [r.position for r in exported(host)] == list(range(1, 26))


def test_a_withheld_row_is_never_exported(host, outbox):
    add_rows(host, 5, directory="/work/a")
    add_rows(host, 5, directory="/work/secret")
    host.policy.input("class-list").set("/work/secret", "local-only")
    exporter(host).run()
    assert {r.directory for r in exported(host)} == {"/work/a"}
    assert len(exported(host)) == 5


def test_a_policy_change_withholds_later_rows_and_retracts_nothing(host, outbox):
    add_rows(host, 3, directory="/work/b")
    exporter(host).run()
    host.policy.input("class-list").set("/work/b", "local-only")
    add_rows(host, 4, directory="/work/b")
    add_rows(host, 2, directory="/work/a")
    summary = exporter(host).run()
    assert summary.carried == ["context"]
    rows = exported(host)
    assert [r.directory for r in rows] == ["/work/b"] * 3 + ["/work/a"] * 2


def test_the_destination_position_is_the_truth_not_the_cache(host, outbox):
    add_rows(host, 8)
    exporter(host).run()
    cache = RefCache(host.root)
    cached = cache.load(select_destination(host).key)
    cached.record("main", Ref(content=1_000, **cached.ref("main").governance()))
    cache.save(cached)
    add_rows(host, 4)
    summary = exporter(host).run()
    assert summary.rows == 4
    (host.root / CACHE_PATH).unlink()
    add_rows(host, 1)
    assert exporter(host).run().rows == 1
    assert [r.position for r in exported(host)] == list(range(1, 14))


def test_content_only_push_asserts_nothing_when_the_destination_moved(host, outbox):
    add_rows(host, 3)
    exporter(host).run()
    move_destination_context(outbox)
    add_rows(host, 3)
    summary = exporter(host).run()
    assert (summary.rows, summary.carried) == (6 - 3, [])
    assert json.loads(published_file(outbox).read_text())["context"] == "f" * 64
    report = exporter(host).report()
    assert report.governance.moved() == ["context"]
    assert report.since_last_push.moved() == []


def test_a_governance_conflict_holds_back_the_write_and_content_still_flows(
        host, outbox, collected_events):
    add_rows(host, 3)
    exporter(host).run()
    move_destination_context(outbox)
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    add_rows(host, 3)
    summary = exporter(host).run()
    assert (summary.rows, summary.carried) == (3, [])
    assert [r.position for r in exported(host)] == [1, 2, 3, 4, 5, 6]
    (conflict,) = summary.conflicts
    assert (conflict.component, conflict.found) == ("context", "f" * 64)
    assert conflict.attempted == local_governance(host).context
    assert json.loads(published_file(outbox).read_text())["context"] == "f" * 64
    assert "cannot resolve" in str(summary.conflict())
    assert [e.attributes for e in collected_events.named("export.conflict")] == [
        {"component": "context"}
    ]
    # Not retried, not announced again, content still flows: one event in all.
    add_rows(host, 2)
    again = exporter(host).run()
    assert (again.rows, again.batches, len(again.conflicts)) == (2, 1, 1)
    assert len(collected_events.named("export.conflict")) == 1
    assert [e.attributes["conflicts"] for e in collected_events.named("export.pushed")] == [
        0, 1, 1]
    status = exporter(host).report().as_status()
    assert status["conflicts"].startswith("context: this host's ")
    assert status["rows_behind"] == 0


def test_ticks_stay_ok_while_a_conflict_stands_and_rows_keep_flowing(host, outbox):
    add_rows(host, 3)
    assert host.tick().ok
    move_destination_context(outbox)
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    for _ in range(3):
        add_rows(host, 2)
        report = host.tick()
        assert report.ok, report.failed  # reported, never a failed step
        assert report.count("export", "conflicts") == 1
    assert [r.position for r in exported(host)] == list(range(1, 10))


def test_a_conflict_ends_when_one_side_changes(host, outbox, collected_events):
    add_rows(host, 2)
    exporter(host).run()
    agreed = local_governance(host).context
    move_destination_context(outbox)
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    assert len(exporter(host).run().conflicts) == 1
    move_destination_context(outbox, agreed)  # the other writer puts the agreed value back
    summary = exporter(host).run()
    assert (summary.conflicts, summary.carried) == ([], ["context"])
    assert json.loads(published_file(outbox).read_text())["context"] == local_governance(
        host).context
    assert exporter(host).report().as_status()["conflicts"] == "none"


def test_adopt_writes_over_exactly_the_value_named(host, outbox):
    add_rows(host, 3)
    exporter(host).run()
    move_destination_context(outbox)
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    add_rows(host, 2)
    summary = exporter(host).run(adopt={"context": "f" * 7})
    assert (summary.rows, summary.carried, summary.conflicts) == (2, ["context"], [])
    local = local_governance(host)
    assert json.loads(published_file(outbox).read_text())["context"] == local.context
    assert exporter(host).report().governance.current()


def test_adopt_refuses_a_value_that_moved_since_and_writes_nothing(host, outbox):
    add_rows(host, 3)
    exporter(host).run()
    move_destination_context(outbox, "a" * 64)
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    seen = exporter(host).run().conflicts[0].found
    move_destination_context(outbox, "b" * 64)  # it moves again before the operator acts
    add_rows(host, 2)
    before = (published_file(outbox).read_bytes(), exported(host))
    with pytest.raises(AdoptRefused, match="moved since you looked"):
        exporter(host).run(adopt={"context": seen[:12]})
    assert (published_file(outbox).read_bytes(), exported(host)) == before
    with pytest.raises(AdoptRefused, match="at least 7 characters"):
        exporter(host).run(adopt={"context": "bbb"})
    assert exporter(host).run(adopt={"context": "b" * 12}).carried == ["context"]


def test_rerun_after_the_destination_wrote_governance_unrecorded_is_not_a_conflict(
        host, outbox):
    add_rows(host, 3)
    exporter(host).run()
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    destination = select_destination(host)

    class DiesAfterWriting:
        name, key = destination.name, destination.key
        published, instance = destination.published, destination.instance

        def push(self, batch):
            destination.push(batch)
            raise KeyboardInterrupt  # the pusher never learns the write happened

    with pytest.raises(KeyboardInterrupt):
        Exporter(host, DiesAfterWriting(), batch_rows=10).run()
    add_rows(host, 2)
    summary = exporter(host).run()
    assert summary.rows == 2
    assert [r.position for r in exported(host)] == [1, 2, 3, 4, 5]


def test_a_replaced_store_drops_cached_positions(host, outbox):
    add_rows(host, 2)
    exporter(host).run()
    cache = RefCache(host.root)
    cached = cache.load(select_destination(host).key)
    cached.store = "another-store"
    cache.save(cached)
    summary = exporter(host).run()
    assert summary.positions_dropped
    assert RefCache(host.root).load(select_destination(host).key).ref().content == 2


def test_apply_governance_asserts_only_the_components_a_push_sets():
    held = Ref(context="c-other", terms="t1", decisions="d1")
    batch = ExportBatch(stream="main", origin="o", rows=[],
                        sets=Ref(terms="t2"), expect=Ref(terms="t1"))
    assert apply_governance(held, batch) == Ref(context="c-other", terms="t2", decisions="d1")
    stale = ExportBatch(stream="main", origin="o", rows=[],
                        sets=Ref(context="c2"), expect=Ref(context="c1"))
    with pytest.raises(Conflict):
        apply_governance(held, stale)
    already = ExportBatch(stream="main", origin="o", rows=[],
                          sets=Ref(context="c-other"), expect=Ref(context="c1"))
    assert apply_governance(held, already) == held
    first_contact = ExportBatch(stream="main", origin="o", rows=[], sets=Ref(context="c9"))
    assert apply_governance(held, first_contact).context == "c9"


def test_decisions_fold_leaves_poll_only_records_out(host):
    assert decisions_identity(host) == fold({})
    polled = PollSection(last_polled_at="2024-05-01T00:00:00Z")
    host.ledger.write(PortableRecord(ref="o/r#1", poll=polled))
    assert decisions_identity(host) == fold({})
    host.ledger.write(PortableRecord(ref="o/r#2", control={"assignee": "me"}))
    with_control = decisions_identity(host)
    assert with_control != fold({})
    host.ledger.write(PortableRecord(ref="o/r#2", control={"assignee": "me"},
                                     poll=PollSection(last_polled_at="2024-06-01T00:00:00Z")))
    assert decisions_identity(host) == with_control  # polling is not a decision
    host.ledger.write(PortableRecord(ref="o/r#3", ended=EndedStamp(at="2024-06-02T00:00:00Z",
                                                                  state="closed")))
    assert decisions_identity(host) not in (with_control, fold({}))


class ExtraEvent:
    @hookimpl
    def hostcore_events(self):
        return EventSpec("extra.thing", {"count": int})


def test_terms_identify_the_event_catalog_in_force(make_host):
    plain, extended = make_host(), make_host(ExtraEvent())
    assert terms_identity(plain) == terms_identity(make_host())
    assert terms_identity(plain) != terms_identity(extended)


def test_report_counts_rows_behind_and_caps_the_count(host):
    add_rows(host, 7)
    report = exporter(host).report(count_limit=5)
    assert (report.position, report.rows_behind, report.rows_behind_capped) == (0, 5, True)
    exporter(host).run(max_rows=4)
    report = exporter(host).report()
    assert (report.position, report.rows_behind, report.rows_behind_capped) == (4, 3, False)
    assert report.since_last_push.content.status is Status.AHEAD
    status = report.as_status()
    assert status["rows_behind"] == 3
    assert status["governance"] == {"context": "current", "terms": "current",
                                    "decisions": "current"}


def test_export_pushed_event_carries_counts_only(host, collected_events):
    add_rows(host, 12)
    exporter(host).run()
    assert [e.attributes for e in collected_events.named("export.pushed")] == [
        {"rows": 12, "batches": 3, "governance": True, "done": True, "conflicts": 0,
         "resumed": 0}
    ]


def test_rows_keep_their_payload_verbatim(host, outbox):
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/work/a",
                                   payload={"text": "é\n\"quoted\"", "nested": {"a": [1, 2]}},
                                   key="k1")])
    exporter(host).run()
    (row,) = exported(host)
    assert msgspec.json.decode(row.payload) == {"text": "é\n\"quoted\"", "nested": {"a": [1, 2]}}
    assert row.key == "k1"
    assert msgspec.json.decode(published_file(outbox, host).read_bytes(), type=Ref).content == 0


def test_local_ref_is_the_last_permitted_position_and_the_identities_in_force(host):
    from hostcore.export.exporter import local_ref

    assert local_ref(host).content == 0
    add_rows(host, 4, directory="/work/a")
    add_rows(host, 2, directory="/work/secret")
    host.policy.input("class-list").set("/work/secret", "local-only")
    ref = local_ref(host)
    assert ref.content == 4  # the withheld rows at 5 and 6 are not in the feed
    assert ref.context == host.seam.export_policy_fingerprint()
    assert (ref.terms, ref.decisions) == (terms_identity(host), decisions_identity(host))
    assert local_ref(host, after=4).content == 4


def test_report_asks_the_destination_when_no_plugin_publishes_a_ref(make_host, outbox):
    from hostcore_directory_destination.destination import DirectoryDestination

    class BareDestinationPlugin:  # registers a destination, implements no published-ref hook
        @hookimpl
        def hostcore_destinations(self):
            return DirectoryDestination(outbox)

    host = make_host(BareDestinationPlugin())
    add_rows(host, 3)
    exporter(host).run()
    add_rows(host, 2)
    report = exporter(host).report()
    assert (report.position, report.rows_behind) == (3, 2)
    assert report.governance.current() and report.governance.context.status is Status.CURRENT


def test_the_worker_pushes_a_bounded_slice_and_reports_pending(host, outbox):
    from hostcore.export.plugin import ExportWorker

    add_rows(host, 5)
    worker = ExportWorker(host, run_rows=3)
    first = worker.run(host)
    assert (first.pending, first.counts) == (True, {"rows": 3, "batches": 2, "conflicts": 0})
    second = worker.run(host)
    assert (second.pending, second.counts) == (False, {"rows": 2, "batches": 1, "conflicts": 0})
    assert [r.position for r in exported(host)] == [1, 2, 3, 4, 5]


def test_export_and_status_run_on_any_thread(host, outbox):
    add_rows(host, 5)
    host.status()  # the ledger and store are first used on this thread
    exporter(host).run(max_rows=2)
    results: dict[str, object] = {}

    def work() -> None:
        try:
            results["run"] = exporter(host).run()
            results["status"] = host.status()["components"]["worker"]["export"]
        except Exception as exc:  # reported below with its kind
            results["error"] = exc

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=60)
    assert "error" not in results, repr(results.get("error"))
    assert results["run"].rows == 3
    assert results["status"]["rows_behind"] == 0
    assert exporter(host).report().position == 5  # and back on the first thread


def test_a_folder_at_the_cache_path_does_not_fail_an_export_after_its_rows_were_pushed(
        host, outbox):
    add_rows(host, 4)
    (host.root / CACHE_PATH).mkdir(parents=True)
    summary = exporter(host).run()
    assert (summary.rows, summary.done, summary.cache_saved) == (4, True, False)
    assert [r.position for r in exported(host)] == [1, 2, 3, 4]
    status = exporter(host).report().as_status()
    assert status["ref_cache"] == "not kept: something other than a file is at its path"
    assert status["rows_behind"] == 0
    add_rows(host, 1)
    again = exporter(host).run()  # no cache: it reads what the folder publishes, agrees
    assert (again.rows, again.conflicts) == (1, [])


def test_report_shows_the_selected_destinations_ref_not_anothers(make_host, tmp_path):
    from hostcore_directory_destination.destination import DirectoryDestination

    class Second(DirectoryDestination):
        name = "second"

    second = Second(tmp_path / "second-outbox")

    class SecondPlugin:
        @hookimpl
        def hostcore_destinations(self):
            return second

        @hookimpl
        def hostcore_published_ref(self, stream, host, destination):
            if destination is not second:
                return None
            return second.published(stream, host.store.instance_id)

    host = make_host(directory_plugin, SecondPlugin(), config={"plugins": {
        "directory-destination": {"path": str(tmp_path / "first-outbox")},
        "export": {"destination": "directory"}}})
    add_rows(host, 6)
    Exporter(host, select_destination(host, "directory")).run()
    Exporter(host, second, batch_rows=10).run(max_rows=2)
    assert exporter(host).report().position == 6
    report = Exporter(host, second).report()
    assert (report.destination, report.position, report.rows_behind) == ("second", 2, 4)
