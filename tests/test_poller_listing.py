"""Listed items: new and changed items update poll and reach hostcore_work_item_event;
a receiver that raises neither stops the poller nor the other receivers; the poll
worker, ``hostcore poll`` and the ledger's status section."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec
import pytest

from hostcore.plugin.markers import hookimpl
from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)
from hostcore.workitems.ledger import EndedStamp, PollSection, PortableRecord
from hostcore.workitems.poller import _SEEN_COMMENTS_CAP, DISPATCH_GIVE_UP_AFTER


class ListingProvider:
    """Registers itself as the ``listing`` provider of scope ``o/r``."""

    name = "listing"
    __name__ = "listing-provider-plugin"

    def __init__(self) -> None:
        self.items: dict[str, WorkItem] = {}
        self.fail_listing = False
        self.unavailable: str | None = None

    def put(self, number: int, updated: str = "u1", comments: tuple[str, ...] = ()) -> None:
        ref = f"o/r#{number}"
        self.items[ref] = WorkItem(ref=WorkItemRef(ref), title=f"item {number}",
                                   updated_at=updated, comment_ids=comments)

    def availability(self) -> str | None:
        return self.unavailable

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("o/r#")

    def scope_of(self, ref: WorkItemRef) -> str:
        return "o/r"

    def list_items(self) -> Listing:
        if self.fail_listing:
            raise ProviderError("o/r: GitHub is down", scope="o/r")
        return Listing((ScopeListing(scope="o/r", status="complete",
                                     items=tuple(self.items.values())),))

    def closure(self, ref: WorkItemRef) -> Closure:
        return Closure(state="closed")

    @hookimpl
    def hostcore_providers(self, host: Any) -> ListingProvider:
        return self


class Receiver:
    def __init__(self, name: str, fail: bool = False) -> None:
        self.__name__ = name
        self.fail = fail
        self.events: list[Any] = []

    @hookimpl
    def hostcore_work_item_event(self, event: Any, host: Any) -> None:
        self.events.append(event)
        if self.fail:
            raise RuntimeError("receiver bug")


@pytest.fixture
def provider() -> ListingProvider:
    return ListingProvider()


def kinds(receiver: Receiver) -> list[tuple[str, str]]:
    return [(e.kind, e.ref.ref) for e in receiver.events]


def test_new_and_changed_items_are_dispatched_and_remembered(make_host, provider):
    receiver = Receiver("receiver")
    host = make_host(provider, receiver)
    provider.put(1)
    host.poller.cycle()
    assert kinds(receiver) == [("opened", "o/r#1")]
    record = host.ledger.read("o/r#1")
    assert record is not None and record.poll is not None
    assert record.poll.updated_at == "u1" and record.poll.announced_at
    assert record.poll.last_polled_at == record.poll.announced_at
    receiver.events.clear()
    host.poller.cycle()
    assert receiver.events == []
    provider.put(1, updated="u2")
    summary = host.poller.cycle()[0]
    assert kinds(receiver) == [("changed", "o/r#1")] and summary.changed == 1
    assert receiver.events[0].item.title == "item 1"


def test_a_section_a_receiver_writes_during_delivery_is_kept(make_host, provider):
    class SessionStarter:
        __name__ = "session-starter"

        @hookimpl
        def hostcore_work_item_event(self, event: Any, host: Any) -> None:
            record = host.ledger.read(event.ref.ref) or PortableRecord(ref=event.ref.ref)
            host.ledger.write(msgspec.structs.replace(record, session={"id": "s1"}))

    host = make_host(provider, SessionStarter())
    provider.put(1)
    host.poller.cycle()
    record = host.ledger.read("o/r#1")
    assert record.session == {"id": "s1"} and record.poll is not None


def test_an_unchanged_listing_reads_and_writes_nothing(make_host, provider):
    host = make_host(provider)
    for n in range(1, 11):
        provider.put(n)
    host.poller.cycle()
    reads, writes = host.ledger.counters.reads, host.ledger.counters.writes
    summary = host.poller.cycle()[0]
    assert summary.listed == 10
    assert host.ledger.counters.reads == reads and host.ledger.counters.writes == writes


def test_new_comments_raise_commented_and_the_baseline_is_capped(make_host, provider):
    receiver = Receiver("receiver")
    host = make_host(provider, receiver)
    provider.put(1, comments=("c1",))
    host.poller.cycle()
    many = tuple(f"c{n}" for n in range(1, _SEEN_COMMENTS_CAP + 50))
    provider.put(1, comments=many)
    host.poller.cycle()
    commented = [e for e in receiver.events if e.kind == "commented"]
    assert len(commented) == 1 and len(commented[0].comment_ids) == len(many) - 1
    poll = host.ledger.read("o/r#1").poll
    assert len(poll.seen_comments) == _SEEN_COMMENTS_CAP
    assert poll.seen_comments[-1] == many[-1]


def test_a_raising_receiver_stops_neither_the_poller_nor_the_others(make_host, provider,
                                                                    collected_events):
    bad, good = Receiver("bad-receiver", fail=True), Receiver("good-receiver")
    host = make_host(provider, bad, good)
    provider.put(1)
    provider.put(2)
    summary = host.poller.cycle()[0]
    assert sorted(kinds(good)) == [("opened", "o/r#1"), ("opened", "o/r#2")]
    assert summary.listed == 2 and len(summary.errors) == 2
    errors = collected_events.named("poll.item_error")
    assert [e.attributes for e in errors] == [{"stage": "dispatch", "will_retry": True}] * 2
    good.events.clear()
    host.poller.cycle()  # not delivered yet: delivered again
    assert sorted(kinds(good)) == [("opened", "o/r#1"), ("opened", "o/r#2")]


def test_the_poller_gives_up_on_an_item_after_repeated_failures(make_host, provider,
                                                                collected_events):
    bad = Receiver("bad-receiver", fail=True)
    host = make_host(provider, bad)
    provider.put(1)
    for _ in range(DISPATCH_GIVE_UP_AFTER + 2):
        host.poller.cycle()
    assert len(bad.events) == DISPATCH_GIVE_UP_AFTER
    retries = [e.attributes["will_retry"] for e in collected_events.named("poll.item_error")]
    assert retries == [True] * (DISPATCH_GIVE_UP_AFTER - 1) + [False]
    poll = host.ledger.read("o/r#1").poll
    assert poll.gave_up is not None and poll.gave_up.failures == DISPATCH_GIVE_UP_AFTER
    bad.fail = False
    provider.put(1, updated="u2")  # a new version of the item is tried again
    host.poller.cycle()
    assert bad.events[-1].kind in ("opened", "changed")
    assert host.ledger.read("o/r#1").poll.gave_up is None


def test_a_listed_item_with_an_old_stamp_is_open_again(make_host, provider):
    receiver = Receiver("receiver")
    host = make_host(provider, receiver)
    host.ledger.write(PortableRecord(ref="o/r#1", ended=EndedStamp(at="t", state="closed")))
    provider.put(1)
    host.poller.cycle()
    record = host.ledger.read("o/r#1")
    assert record.ended is None and record.poll is not None
    assert kinds(receiver) == [("opened", "o/r#1")]


def test_a_malformed_record_of_a_listed_item_is_left_untouched(make_host, provider):
    host = make_host(provider)
    path = host.ledger.path_for("o/r#1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{not json")
    provider.put(1)
    summary = host.poller.cycle()[0]
    assert path.read_bytes() == b"{not json"
    assert any("not JSON" in e for e in summary.errors)


def test_a_failed_listing_is_reported_and_changes_nothing(make_host, provider,
                                                          collected_events):
    host = make_host(provider)
    host.ledger.write(PortableRecord(ref="o/r#1", session={"id": "s"},
                                     poll=PollSection(last_polled_at="x")))
    provider.fail_listing = True
    summary = host.poller.cycle()[0]
    assert summary.listing == "failed" and "GitHub is down" in summary.errors[0]
    assert host.ledger.read("o/r#1").ended is None
    (cycle,) = collected_events.named("poll.cycle")
    assert cycle.attributes["listing"] == "failed"


def test_an_unavailable_provider_is_skipped_and_the_host_keeps_running(make_host, provider):
    provider.unavailable = "the GitHub CLI is not installed"
    host = make_host(provider)
    report = host.tick()
    assert report.ok
    assert host.status()["components"]["provider"]["listing"]["available"] is False
    assert host.poller.last_cycle()[0].available is False


def test_a_tick_in_which_no_provider_is_usable_reports_it_to_status_in_another_host(
        make_host, provider, collected_events, tmp_path):
    provider.unavailable = "the GitHub CLI is not installed"
    host = make_host(provider, root=tmp_path / "root")
    (step,) = [s for s in host.tick().steps if s.name == "poll"]
    assert step.ok and step.counts["providers"] == 1 and step.counts["errors"] == 1
    (cycle,) = collected_events.named("poll.cycle")
    assert cycle.attributes["available"] is False and cycle.attributes["errors"] == 1
    other = make_host(provider, root=tmp_path / "root")  # as `hostcore status` would
    ledger = other.status()["components"]["worker"]["poll"]
    assert ledger["last_cycle"]["providers"] == 1 and ledger["last_cycle"]["errors"] == 1


def test_one_usable_provider_after_an_unusable_one_gets_a_whole_cycle(make_host, provider):
    class Broken(ListingProvider):
        name = "broken"
        __name__ = "broken-provider-plugin"

    broken = Broken()
    broken.unavailable = "the GitHub CLI is not installed"
    receiver = Receiver("receiver")
    host = make_host(broken, provider, receiver)
    provider.put(1)
    (step,) = [s for s in host.tick().steps if s.name == "poll"]
    assert step.counts["providers"] == 2 and step.counts["new"] == 1
    assert kinds(receiver) == [("opened", "o/r#1")]
    assert [s.available for s in host.poller.last_cycle()] == [False, True]


def test_ended_records_wait_for_a_cycle_that_can_list_to_be_archived(
        make_host, provider, tmp_path):
    host = make_host(provider, root=tmp_path / "root")
    old = "2026-01-01T00:00:00Z"
    host.ledger.write(PortableRecord(ref="o/r#9", ended=EndedStamp(
        at=old, state="closed", state_reason="completed", closed_at=old, closed_by="octocat")))
    provider.unavailable = "the GitHub CLI is not installed"
    host.tick()
    assert host.ledger.status()["archived"] == 0  # nothing was listed: nothing moves
    provider.unavailable = None
    host = make_host(provider, root=tmp_path / "root")  # the next cron run
    host.tick()
    assert host.ledger.status()["archived"] == 1
    assert host.ledger.read("o/r#9").ended.at == old


def test_the_poll_worker_runs_in_the_tick_before_default_workers(make_host, provider):
    host = make_host(provider)
    provider.put(1)
    report = host.tick()
    poll_step = next(s for s in report.steps if s.name == "poll")
    assert poll_step.ok and poll_step.counts["listed"] == 1
    names = [w.name for w in host.workers]
    assert all(getattr(w, "order", 100) <= 50 for w in host.workers[:names.index("poll")])
    status = host.status()["components"]["worker"]["poll"]
    assert status["ledger"]["records"] == 1 and status["last_cycle"]["listed"] == 1


def test_status_reports_malformed_records(make_host):
    host = make_host()
    host.ledger.portable.mkdir(parents=True, exist_ok=True)
    (host.ledger.portable / "junk-1.json").write_bytes(b"[]")
    assert host.status()["components"]["worker"]["poll"]["ledger"]["malformed"] == 1


def test_poll_once_command_prints_json_and_exits_by_outcome(hostcore_cli, register_plugin,
                                                            provider):
    register_plugin(provider)
    provider.put(1)
    result = hostcore_cli("poll", "--once", "--json")
    assert result.exit_code == 0, result.stderr
    (summary,) = json.loads(result.stdout)
    assert summary["provider"] == "listing" and summary["new"] == 1
    assert set(summary) >= {"listing", "scopes", "listed", "ledger_checks", "closures",
                            "tracked_checks", "errors", "available"}
    provider.fail_listing = True
    failed = hostcore_cli("poll", "--once")
    assert failed.exit_code == 1
    assert "GitHub is down" in failed.stderr


def test_poll_once_with_no_provider_says_so(hostcore_cli):
    result = hostcore_cli("poll", "--once")
    assert result.exit_code == 0
    assert "no work-item provider" in result.stderr


def test_poll_loop_stops_on_sigterm_and_sigint(tmp_path):
    for signum in (signal.SIGTERM, signal.SIGINT):
        root = tmp_path / f"root-{signum}"
        env = {**os.environ, "HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": ""}
        proc = subprocess.Popen([sys.executable, "-m", "hostcore", "poll"], env=env,
                                stderr=subprocess.PIPE, text=True)
        # A loop that never prints must fail the test, not hang it: the kill ends the
        # readline below with EOF.
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        try:
            assert "polling from" in proc.stderr.readline()
            assert "no work-item provider" in proc.stderr.readline()  # a cycle ran
            time.sleep(0.2)
            proc.send_signal(signum)
            assert proc.wait(timeout=20) == 0
            assert "stopped" in proc.stderr.read()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
