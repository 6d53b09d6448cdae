"""Portable records: slugs safe for any ref, the on-disk format, unknown sections kept,
malformed records skipped and counted, hostile refs never written outside the ledger."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcore.errors import RecordError
from hostcore.timestamps import format_utc
from hostcore.timestamps import parse_exact as parse_utc
from hostcore.workitems.items import Listing, ScopeListing, WorkItem, WorkItemRef
from hostcore.workitems.ledger import Ledger
from hostcore.workitems.poller import Poller
from hostcore.workitems.records import (
    SLUG_HASH_LENGTH,
    SLUG_PREFIX_LENGTH,
    EndedStamp,
    PollSection,
    PortableRecord,
    decode_record,
    encode_record,
    slug_for,
)

_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_SLUG = SLUG_PREFIX_LENGTH + 1 + SLUG_HASH_LENGTH


@given(st.text(max_size=2000))
@settings(max_examples=300)
def test_slug_of_any_text_is_a_bounded_safe_file_name(ref):
    slug = slug_for(ref)
    assert _SAFE.match(slug), slug
    assert ".." not in slug and "/" not in slug and os.sep not in slug
    assert len(slug) <= MAX_SLUG


@given(st.text(max_size=200), st.text(max_size=200))
def test_distinct_refs_get_distinct_slugs(a, b):
    if a != b:
        assert slug_for(a) != slug_for(b)


def test_refs_that_read_alike_still_get_their_own_slug():
    refs = ["o/r#1", "O/R#1", "o_r#1", "o/r_1", "o/r#1 ", "o/r#01", "o/r#1/", "o\\r#1"]
    assert len({slug_for(r) for r in refs}) == len(set(refs))


HOSTILE = [
    "../../../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "o/r#1/../../../escape",
    "a" * 512,
    "\u2215\u2215unicode-slash",
    "C:\\Windows\\evil",
    "~/.ssh/authorized_keys",
    "-rf",
    "ref.json",
    ".hidden",
]


@pytest.mark.parametrize("ref", HOSTILE)
def test_hostile_refs_are_written_inside_the_portable_folder_only(tmp_path, ref):
    ledger = Ledger(tmp_path / "root" / "ledger")
    ledger.write(PortableRecord(ref=ref, poll=PollSection(last_polled_at="x")))
    path = ledger.path_for(ref)
    assert path.parent == ledger.portable
    assert ledger.read(ref) is not None
    outside = [p for p in tmp_path.rglob("*") if p.is_file()
               and ledger.directory not in p.parents]
    assert outside == []


@pytest.mark.parametrize("ref", ["", "a\x00b", "line\nbreak", " padded", "x" * 513, "\x1b[31m"])
def test_refs_that_are_not_refs_are_refused(tmp_path, ref):
    with pytest.raises(ValueError, match="work-item ref"):
        WorkItemRef.parse(ref)


def test_hostile_refs_from_a_provider_stay_inside_the_ledger(tmp_path):
    class Hostile:
        name = "hostile"

        def owns(self, ref):
            return True

        def scope_of(self, ref):
            return "s"

        def list_items(self):
            refs = [*HOSTILE, "bad\x00ref", "x" * 5000]
            return Listing((ScopeListing(scope="s", status="complete", items=tuple(
                WorkItem(ref=WorkItemRef(r), updated_at="u") for r in refs)),))

        def closure(self, ref):
            raise AssertionError("nothing is unlisted")

    ledger = Ledger(tmp_path / "root" / "ledger")
    summary = Poller(ledger, [Hostile()], dispatch=lambda e: 0, emit=lambda *a, **k: None,
                     interval=lambda: 60).cycle()[0]
    assert summary.listed == len(HOSTILE)
    assert len(summary.errors) == 2  # the two refs that are not refs
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(ledger.directory in p.parents for p in files)
    assert len(list(ledger.portable.glob("*.json"))) == len(HOSTILE)


def test_record_format_uses_camel_case_sections_and_utc_seconds(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    record = PortableRecord(
        ref="o/r#1",
        poll=PollSection(last_polled_at="2026-06-01T12:00:00Z",
                         closure_checked_at="2026-06-01T13:00:00Z", updated_at="u",
                         seen_comments=["c1"]),
        ended=EndedStamp(at="2026-06-02T00:00:00Z", state="closed", state_reason="completed"),
    )
    ledger.write(record)
    on_disk = json.loads(ledger.path_for("o/r#1").read_text())
    assert on_disk == {
        "ref": "o/r#1",
        "poll": {"lastPolledAt": "2026-06-01T12:00:00Z",
                 "closureCheckedAt": "2026-06-01T13:00:00Z",
                 "updatedAt": "u", "seenComments": ["c1"]},
        "ended": {"at": "2026-06-02T00:00:00Z", "state": "closed",
                  "stateReason": "completed"},
    }
    assert ledger.read("o/r#1") == record


def test_timestamps_are_utc_z_seconds_and_nothing_else_parses():
    from datetime import UTC, datetime, timedelta, timezone

    moment = datetime(2026, 6, 1, 14, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert format_utc(moment) == "2026-06-01T12:00:00Z"
    assert parse_utc("2026-06-01T12:00:00Z") == datetime(2026, 6, 1, 12, tzinfo=UTC)
    for text in ("2026-06-01T12:00:00", "2026-06-01T12:00:00.5Z", "2026-06-01 12:00:00Z",
                 "2026-06-01T12:00:00+00:00", 1, None):
        assert parse_utc(text) is None


def test_unknown_sections_and_fields_survive_a_rewrite(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    path = ledger.path_for("o/r#1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "ref": "o/r#1",
        "poll": {"lastPolledAt": "2026-01-01T00:00:00Z", "fromTheFuture": [1, 2]},
        "session": {"id": "s", "anything": {"nested": True}},
        "graph": {"edges": []},
        "heartbeat": {"v": 3},
        "ended": {"at": "2026-01-02T00:00:00Z", "state": "closed", "by": "someone"},
    }))
    record = ledger.read("o/r#1")
    assert record is not None and record.poll is not None
    ledger.write(record)
    again = json.loads(path.read_text())
    assert again["heartbeat"] == {"v": 3}
    assert again["poll"]["fromTheFuture"] == [1, 2]
    assert again["ended"]["by"] == "someone"
    assert again["session"] == {"id": "s", "anything": {"nested": True}}
    assert again["graph"] == {"edges": []}


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"poll": {}}', "$.ref"),
        (b'{"ref": "o/r#1", "poll": "yes"}', "$.poll"),
        (b'{"ref": "o/r#1", "session": 3}', "$.session"),
        (b'{"ref": "o/r#1", "ended": {"state": "closed"}}', "$.ended"),
        (b'{"ref": "o/r#1", "poll": {"seenComments": "c1"}}', "$.poll"),
    ],
)
def test_malformed_records_raise_naming_the_file_and_field(content, field):
    with pytest.raises(RecordError, match=re.escape(field)) as info:
        decode_record(content, what="portable/x.json")
    assert "portable/x.json" in str(info.value)


def test_malformed_records_are_skipped_with_a_debug_line_and_counted(tmp_path, caplog):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#1", poll=PollSection(last_polled_at="x")))
    (ledger.portable / "junk-0000.json").write_bytes(b"{broken")
    elsewhere = ledger.path_for("o/r#3")
    elsewhere.write_bytes(encode_record(PortableRecord(ref="o/r#2")))  # claims another ref
    with caplog.at_level(logging.DEBUG, logger="hostcore.workitems.ledger"):
        refs = [ref for ref, _ in ledger.iter_records()]
        status = ledger.status()
    assert refs == ["o/r#1"]
    assert status["malformed"] == 2 and status["records"] == 1
    assert any("junk-0000.json" in r.getMessage() for r in caplog.records)
    with pytest.raises(RecordError, match="names"):
        ledger.read("o/r#3")


def test_iter_records_yields_ref_and_record_with_each_section(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="a/b#1", session={"id": "s"}))
    ledger.write(PortableRecord(ref="a/b#2", ended=EndedStamp(at="t", state="merged")))
    got = dict(ledger.iter_records())
    assert got["a/b#1"].session == {"id": "s"} and got["a/b#1"].poll is None
    assert got["a/b#2"].ended is not None and got["a/b#2"].control is None
    assert list(Ledger(tmp_path / "empty").iter_records()) == []


def test_each_change_is_one_atomic_write_with_owner_only_mode(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="o/r#1", poll=PollSection(last_polled_at="x")))
    path = ledger.path_for("o/r#1")
    assert ledger.counters.writes == 1
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in ledger.portable.iterdir()] == [path.name]  # no temp left over


def test_a_record_missing_from_disk_reads_as_none(tmp_path):
    assert Ledger(tmp_path / "ledger").read("o/r#1") is None


def test_record_files_are_named_by_slug(tmp_path: Path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.write(PortableRecord(ref="Owner/Repo#7"))
    assert ledger.path_for("Owner/Repo#7").name == f"{slug_for('Owner/Repo#7')}.json"
    assert ledger.path_for("Owner/Repo#7").name.startswith("Owner_Repo_7-")
