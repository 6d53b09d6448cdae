"""What the tools answer, computed from a real read-only host over a real ledger.

The protocol is the other tests' subject; these pin the answers' content: the
filters and pages of ``work_items``, the age of the last listing, and the count
cap that keeps a call at 100,000 records from walking every match.
"""

from __future__ import annotations

import os
import time

import msgspec
import pytest
from hostcore_mcp import answers

from hostcore.host import Host
from hostcore.workitems.ledger import EndedStamp, Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import LAST_CYCLE_FILE, PollSummary


@pytest.fixture
def ledger_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    ledger = Ledger(root / "ledger")
    for n in range(30):
        ledger.write(PortableRecord(ref=f"o{n % 3}/r#{n}", poll=PollSection(
            last_polled_at=f"2026-11-{1 + n // 3:02d}T00:00:00Z", updated_at=f"u{n}")))
    ledger.write(PortableRecord(ref="o0/r#99", poll=PollSection(
        last_polled_at="2026-11-01T00:00:00Z"), ended=EndedStamp(
            at="2026-11-02T00:00:00Z", state="closed")))
    ledger.close()
    return root


def read_only(root) -> Host:
    return Host(root=root, load_entrypoints=False, env={}, read_only=True)


def test_work_items_filter_by_repository_and_page_in_a_stable_order(ledger_root):
    with read_only(ledger_root) as host:
        first = answers.work_items(host, repository="o1/r", state="open", limit=4, offset=0)
        rest = answers.work_items(host, repository="o1/r", state="open", limit=100, offset=4)
        everything = answers.work_items(host, repository=None, state="open", limit=100,
                                        offset=0)
    assert first["matched"] == rest["matched"] == 10 and not first["matched_capped"]
    refs = [i["ref"] for i in first["items"] + rest["items"]]
    assert sorted(refs) == sorted(f"o1/r#{n}" for n in range(1, 30, 3))
    assert len(set(refs)) == 10  # the pages neither overlap nor skip
    # Oldest listing first within a repository.
    listed = [i["last_listed_at"] for i in first["items"] + rest["items"]]
    assert listed == sorted(listed)
    assert everything["matched"] == 30
    assert [i["repository"] for i in everything["items"]] == sorted(
        i["repository"] for i in everything["items"])
    assert {i["state"] for i in everything["items"]} == {"open"}


def test_ended_items_are_asked_for_by_state(ledger_root):
    with read_only(ledger_root) as host:
        ended = answers.work_items(host, repository=None, state="ended", limit=10, offset=0)
        both = answers.work_items(host, repository="o0/r", state="any", limit=100, offset=0)
    assert [(i["ref"], i["state"], i["tracking"]) for i in ended["items"]] == [
        ("o0/r#99", "ended", "ended")]
    assert both["matched"] == 11


def test_the_match_count_stops_at_its_cap_and_says_so(ledger_root, monkeypatch):
    monkeypatch.setattr(answers, "MATCH_COUNT_LIMIT", 7)
    with read_only(ledger_root) as host:
        capped = answers.work_items(host, repository=None, state="open", limit=3, offset=0)
    assert capped["matched"] == 7 and capped["matched_capped"] is True
    assert len(capped["items"]) == 3


def test_the_listing_age_comes_from_the_last_cycle_report(ledger_root):
    with read_only(ledger_root) as host:
        assert answers.last_listing(host) == {"age_seconds": None, "complete": False,
                                              "providers": {}}
    report = ledger_root / "ledger" / LAST_CYCLE_FILE
    report.write_bytes(msgspec.json.encode([
        PollSummary(provider="gh", listing="complete"),
        PollSummary(provider="tasks", listing="partial"),
        PollSummary(provider="idle", configured=False)]))
    an_hour_ago = time.time() - 3600
    os.utime(report, (an_hour_ago, an_hour_ago))
    with read_only(ledger_root) as host:
        listing = answers.last_listing(host)
    assert 3599 <= listing["age_seconds"] <= 3700
    assert listing["providers"] == {"gh": "complete", "tasks": "partial"}
    assert listing["complete"] is False  # one provider listed only part


def test_records_written_before_kinds_and_labels_were_kept_read_as_unknown_and_unlabelled(
        ledger_root):
    ledger = Ledger(ledger_root / "ledger")
    ledger.write(PortableRecord(ref="o1/r#200", poll=PollSection(
        last_polled_at="2026-11-20T00:00:00Z", kind="pull_request", labels=["agent", "Bug"])))
    ledger.close()
    with read_only(ledger_root) as host:
        unknown = answers.work_items(host, repository="o1/r", state="open", kind="unknown",
                                     limit=100, offset=0)
        pulls = answers.work_items(host, repository=None, state="open", kind="pull_request",
                                   limit=100, offset=0)
        bug = answers.work_items(host, repository=None, state="any", label="bug", limit=100,
                                 offset=0)
    assert unknown["matched"] == 10  # the old records of o1/r, not the new one
    assert {(i["kind"], tuple(i["labels"])) for i in unknown["items"]} == {("unknown", ())}
    assert [(i["ref"], i["kind"], i["labels"]) for i in pulls["items"]] == [
        ("o1/r#200", "pull_request", ["agent", "Bug"])]
    assert [i["ref"] for i in bug["items"]] == ["o1/r#200"]


def test_ended_items_are_found_by_their_kind_and_labels(ledger_root):
    """An ended record has forgotten ``poll``; its stamp keeps the kind and labels,
    so ``work_items`` filters find it among the ended and among all."""
    ledger = Ledger(ledger_root / "ledger")
    ledger.write(PortableRecord(ref="o2/r#300", ended=EndedStamp(
        at="2026-11-21T00:00:00Z", state="merged", kind="pull_request",
        labels=["agent", "Bug"])))
    ledger.close()
    with read_only(ledger_root) as host:
        pulls = answers.work_items(host, repository=None, state="ended", kind="pull_request",
                                   limit=100, offset=0)
        bug = answers.work_items(host, repository=None, state="ended", label="BUG",
                                 limit=100, offset=0)
        anywhere = answers.work_items(host, repository="o2/r", state="any", label="agent",
                                      limit=100, offset=0)
    assert [(i["ref"], i["state"], i["kind"], i["labels"]) for i in pulls["items"]] == [
        ("o2/r#300", "ended", "pull_request", ["agent", "Bug"])]
    assert [i["ref"] for i in bug["items"]] == ["o2/r#300"] and bug["matched"] == 1
    assert [i["ref"] for i in anywhere["items"]] == ["o2/r#300"]
