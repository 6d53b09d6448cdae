"""The folder: durable position, torn-tail recovery, dedupe, segments, refusals."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import msgspec
import pytest
from hostcore_directory_destination.destination import (
    TAIL_CHUNK_BYTES,
    DestinationError,
    DirectoryDestination,
)

from hostcore.export.batch import DestinationChanged, ExportBatch, ExportRow
from hostcore.export.ref import ABSENT, Conflict, Ref

ORIGIN = "0123abcd"


def row(position: int, size: int = 10) -> ExportRow:
    payload = json.dumps({"n": position, "pad": "x" * size})
    return ExportRow(position, "sessions", "claude", "s1", "2024-05-01T10:00:00Z", "/work/a", "",
                     msgspec.Raw(payload), None)


def batch(*positions: int, sets: Ref = Ref(), expect: Ref = Ref(), size: int = 10,
          origin: str = ORIGIN, destination: str = "", after: int = -1) -> ExportBatch:
    return ExportBatch(stream="main", origin=origin, rows=[row(p, size) for p in positions],
                       sets=sets, expect=expect, destination=destination, after=after)


def positions(destination: DirectoryDestination, origin: str = ORIGIN) -> list[int]:
    return [r.position for r in destination.read_rows("main", origin)]


@pytest.fixture
def folder(tmp_path: Path) -> DirectoryDestination:
    return DirectoryDestination(tmp_path / "outbox")


def test_push_appends_and_publishes_the_new_position(folder):
    assert folder.published("main", ORIGIN) == Ref()
    result = folder.push(batch(1, 2, 5, sets=Ref(context="c1")))
    assert result == Ref(content=5, context="c1")
    assert folder.published("main", ORIGIN) == Ref(content=5, context="c1")
    assert positions(folder) == [1, 2, 5]


def test_rows_at_or_below_the_position_are_dropped(folder):
    folder.push(batch(1, 2, 3))
    assert folder.push(batch(2, 3, 4, 5)).content == 5
    assert folder.push(batch(1, 2)).content == 5
    assert positions(folder) == [1, 2, 3, 4, 5]


def test_rows_out_of_order_are_refused_and_nothing_is_written(folder):
    folder.push(batch(1))
    with pytest.raises(DestinationError, match="ascending"):
        folder.push(batch(4, 3))
    with pytest.raises(DestinationError, match="ascending"):
        folder.push(batch(2, 2))
    assert positions(folder) == [1]


def test_a_torn_final_line_is_cut_by_the_next_push(tmp_path):
    recovered = []
    folder = DirectoryDestination(tmp_path / "outbox", on_recover=recovered.append)
    folder.push(batch(1, 2, 3))
    (segment,) = folder.segments("main", ORIGIN)
    torn = b'[4,"sessions","cla'  # a write killed midway
    with open(segment, "ab") as handle:
        handle.write(torn)
    size = segment.stat().st_size
    assert folder.published("main", ORIGIN).content == 3  # reading repairs nothing
    assert segment.stat().st_size == size
    assert folder.push(batch(4, 5)).content == 5
    assert positions(folder) == [1, 2, 3, 4, 5]
    assert [(r.torn_bytes, r.segments_dropped) for r in recovered] == [(len(torn), 0)]


def test_a_segment_with_no_complete_line_is_removed(tmp_path):
    folder = DirectoryDestination(tmp_path / "outbox", segment_bytes=1)
    folder.push(batch(1))
    folder.push(batch(2))
    _older, newer = folder.segments("main", ORIGIN)
    newer.write_bytes(b'[2,"sess')  # the first write into a new segment was cut short
    assert folder.published("main", ORIGIN).content == 1
    folder.push(batch(2, 3))
    assert folder.last_recovery.segments_dropped == 1
    assert positions(folder) == [1, 2, 3]


def test_segments_roll_at_the_size_limit_and_are_named_by_first_position(tmp_path):
    folder = DirectoryDestination(tmp_path / "outbox", segment_bytes=300)
    for start in range(1, 13, 3):
        folder.push(batch(start, start + 1, start + 2))
    names = [p.name for p in folder.segments("main", ORIGIN)]
    assert len(names) > 1
    assert names[0] == f"{1:020d}.jsonl"
    assert all(name.endswith(".jsonl") and len(name) == 26 for name in names)
    assert positions(folder) == list(range(1, 13))


def test_recovery_reads_only_the_end_of_one_segment(tmp_path):
    folder = DirectoryDestination(tmp_path / "outbox")
    for start in range(1, 2001, 100):
        folder.push(batch(*range(start, start + 100), size=200))
    (segment,) = folder.segments("main", ORIGIN)
    assert segment.stat().st_size > 4 * TAIL_CHUNK_BYTES
    folder.push(batch(2001))
    assert folder.last_recovery.bytes_read <= TAIL_CHUNK_BYTES


def test_a_row_longer_than_one_read_chunk_is_found(folder):
    folder.push(batch(1, 2, size=3 * TAIL_CHUNK_BYTES))
    assert folder.published("main", ORIGIN).content == 2


def test_origins_are_separate_feeds(folder):
    folder.push(batch(1, 2, 3, origin="store-a"))
    folder.push(batch(1, 2, origin="store-b"))
    assert folder.published("main", "store-a").content == 3
    assert folder.published("main", "store-b").content == 2
    assert positions(folder, "store-b") == [1, 2]


def test_governance_is_compare_and_swap_per_component(folder):
    folder.push(batch(1, sets=Ref(context="c1", terms="t1")))
    folder.push(batch(2, sets=Ref(context="c2"), expect=Ref(context="c1")))
    with pytest.raises(Conflict) as caught:
        folder.push(batch(3, sets=Ref(terms="t2"), expect=Ref(terms="t0")))
    assert (caught.value.component, caught.value.actual) == ("terms", "t1")
    assert positions(folder) == [1, 2]  # a refused push writes nothing
    assert folder.push(batch(3)).content == 3  # content alone asserts nothing
    assert folder.published("main", ORIGIN) == Ref(content=3, context="c2", terms="t1")


def test_an_undecodable_published_ref_stops_the_push(folder):
    folder.push(batch(1, sets=Ref(context="c1")))
    (folder.path / "main" / ORIGIN / "ref.json").write_bytes(b"\x00not json")
    with pytest.raises(DestinationError, match=r"ref\.json"):
        folder.push(batch(2))
    assert positions(folder) == [1]


@pytest.mark.parametrize("line", [b"garbage\n", b'{"position": 2}\n', b"[]\n"])
def test_a_last_line_that_is_not_a_row_stops_the_push(folder, line):
    folder.push(batch(1))
    (segment,) = folder.segments("main", ORIGIN)
    with open(segment, "ab") as handle:
        handle.write(line)
    with pytest.raises(DestinationError, match="refusing to guess"):
        folder.push(batch(2))


def test_lines_are_arrays_in_export_row_field_order(folder):
    folder.push(batch(3))
    (segment,) = folder.segments("main", ORIGIN)
    assert json.loads(segment.read_bytes()) == [
        3, "sessions", "claude", "s1", "2024-05-01T10:00:00Z", "/work/a", "",
        {"n": 3, "pad": "x" * 10}, None]


def test_read_rows_returns_the_rows_pushed_across_segments(tmp_path):
    folder = DirectoryDestination(tmp_path / "outbox", segment_bytes=200)
    pushed = [row(p) for p in range(1, 8)]
    for start in range(0, 7, 2):
        folder.push(ExportBatch(stream="main", origin=ORIGIN, rows=pushed[start:start + 2]))
    assert len(folder.segments("main", ORIGIN)) > 1
    assert list(folder.read_rows("main", ORIGIN)) == pushed
    assert list(folder.read_rows("main", "another-store")) == []


def test_read_rows_leaves_out_a_torn_final_line(folder):
    folder.push(batch(1, 2))
    (segment,) = folder.segments("main", ORIGIN)
    with open(segment, "ab") as handle:
        handle.write(b'[3,"sess')
    assert [r.position for r in folder.read_rows("main", ORIGIN)] == [1, 2]


def test_read_rows_names_the_segment_and_line_that_is_not_a_row(folder):
    folder.push(batch(1))
    (segment,) = folder.segments("main", ORIGIN)
    with open(segment, "ab") as handle:
        handle.write(b'{"position": 2}\n')
    with pytest.raises(DestinationError, match=rf"{segment.name}: line 2 is not an exported row"):
        list(folder.read_rows("main", ORIGIN))


@pytest.mark.parametrize("name", ["..", "a/b", "", ".hidden", "x" * 200, "a\x00b"])
def test_stream_and_origin_must_be_plain_names(folder, name):
    with pytest.raises(DestinationError, match="expected a short name"):
        folder.push(batch(1, origin=name))
    with pytest.raises(DestinationError, match="expected a short name"):
        folder.published(name, ORIGIN)
    assert not (folder.path.parent / "b").exists()


def test_files_are_owner_only(folder):
    folder.push(batch(1, sets=Ref(context="c1")))
    (segment,) = folder.segments("main", ORIGIN)
    for path in (segment, folder.path / "main" / ORIGIN / "ref.json",
                 folder.path / ".instance"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_unconfigured_destination_is_unavailable_and_refuses(tmp_path):
    folder = DirectoryDestination(None)
    assert "[plugins.directory-destination] path" in folder.availability()
    with pytest.raises(DestinationError):
        folder.push(batch(1))


def test_status_counts_segments_and_bytes(folder):
    assert folder.status() == {"segments": 0, "bytes": 0}
    folder.push(batch(1, 2))
    (segment,) = folder.segments("main", ORIGIN)
    assert folder.status() == {"segments": 1, "bytes": segment.stat().st_size}


# -- identity and continuity ---------------------------------------------------------


def test_the_first_push_creates_the_instance_id_and_it_stays(folder):
    assert folder.instance() == ""
    folder.push(batch(1))
    instance = folder.instance()
    assert len(instance) == 32 and (folder.path / ".instance").read_text() == f"{instance}\n"
    folder.push(batch(2))
    assert DirectoryDestination(folder.path).instance() == instance


def test_a_folder_deleted_and_re_created_is_another_instance(folder):
    folder.push(batch(1, 2))
    before = folder.instance()
    shutil.rmtree(folder.path)
    with pytest.raises(DestinationChanged, match="another instance"):
        folder.push(batch(3, destination=before, after=2))
    assert folder.instance() not in ("", before)
    assert positions(folder) == []  # the refused push wrote no row


def test_a_push_resumed_from_another_position_is_refused(folder):
    folder.push(batch(1, 2, 3))
    instance = folder.instance()
    with pytest.raises(DestinationChanged, match="holds position 3, not 5"):
        folder.push(batch(6, destination=instance, after=5, sets=Ref(context="c9")))
    assert positions(folder) == [1, 2, 3]
    assert folder.published("main", ORIGIN).context == ""
    assert folder.push(batch(4, destination=instance, after=3)).content == 4


def test_a_backup_copied_back_keeps_its_id_and_is_caught_by_its_position(folder, tmp_path):
    folder.push(batch(1, 2))
    shutil.copytree(folder.path, tmp_path / "backup")
    instance = folder.instance()
    folder.push(batch(3, 4, destination=instance, after=2))
    shutil.rmtree(folder.path)
    (tmp_path / "backup").rename(folder.path)
    assert folder.instance() == instance
    with pytest.raises(DestinationChanged, match="holds position 2, not 4"):
        folder.push(batch(5, destination=instance, after=4))
    assert folder.push(batch(3, 4, 5, destination=instance, after=2)).content == 5
    assert positions(folder) == [1, 2, 3, 4, 5]


def test_a_segment_deleted_under_a_push_is_not_re_created_with_a_gap(folder, monkeypatch):
    folder.push(batch(1, 2))
    (segment,) = folder.segments("main", ORIGIN)
    real_tail = DirectoryDestination._tail

    def tail_then_delete(self, origin_dir, *, repair):
        found = real_tail(self, origin_dir, repair=repair)
        if repair:
            segment.unlink()  # someone's rm -rf, between this push's check and its write
        return found

    monkeypatch.setattr(DirectoryDestination, "_tail", tail_then_delete)
    with pytest.raises(DestinationChanged, match="removed during the push"):
        folder.push(batch(3, 4, destination=folder.instance(), after=2))
    assert not segment.exists()  # not re-created holding only rows 3 and 4


def test_two_first_pushes_agree_on_one_instance_id(tmp_path):
    path = tmp_path / "outbox"
    first, second = DirectoryDestination(path), DirectoryDestination(path)
    first.push(batch(1, origin="store-a"))
    second.push(batch(1, origin="store-b"))
    assert first.instance() == second.instance() != ""
    assert [p.name for p in path.glob(".instance*")] == [".instance"]


def test_governance_is_published_per_origin(folder):
    folder.push(batch(1, sets=Ref(context="a1"), origin="store-a"))
    folder.push(batch(1, sets=Ref(context="b1"), origin="store-b"))
    folder.push(batch(2, sets=Ref(context="a2"), expect=Ref(context="a1"), origin="store-a"))
    folder.push(batch(2, sets=Ref(context="b2"), expect=Ref(context="b1"), origin="store-b"))
    assert folder.published("main", "store-a") == Ref(content=2, context="a2")
    assert folder.published("main", "store-b") == Ref(content=2, context="b2")


def test_a_create_only_write_never_overwrites(folder):
    folder.push(batch(1, sets=Ref(context="c1"), expect=Ref(context=ABSENT)))
    with pytest.raises(Conflict, match="expected nothing yet, found c1"):
        folder.push(batch(2, sets=Ref(context="c2"), expect=Ref(context=ABSENT)))
    assert positions(folder) == [1]
