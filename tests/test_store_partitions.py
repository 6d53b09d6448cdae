"""The evidence store: partitions and versions, positions, dedupe keys, cursors, purge."""

from __future__ import annotations

import sqlite3

import pytest

from hostcore.errors import RecordError
from hostcore.evidence.store import EvidenceRow, PartitionVersion, Store, StoreError


def row(partition: str = "p", source: str = "src", **fields: object) -> EvidenceRow:
    return EvidenceRow(partition=partition, source_id=source, **fields)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path):
    opened = Store(tmp_path / "store.sqlite3")
    yield opened
    opened.close()


def live_positions(store: Store) -> list[int]:
    db = sqlite3.connect(store.path)
    try:
        return [r[0] for r in db.execute("SELECT position FROM evidence ORDER BY position")]
    finally:
        db.close()


def test_appending_grows_row_count_within_one_epoch(store):
    assert store.append([row(), row()]) == 2
    first = store.partitions()["p"]
    store.append([row()])
    second = store.partitions()["p"]
    assert second.row_count == 3
    assert second.grew_from(first)
    assert not first.grew_from(second)


def test_version_prints_as_epoch_colon_row_count_and_parses_back(store):
    store.append([row(), row()])
    version = store.partitions()["p"]
    assert str(version) == f"{version.epoch}:2"
    assert PartitionVersion.parse(str(version)) == version
    with pytest.raises(RecordError, match="epoch:rowCount"):
        PartitionVersion.parse("7")


def test_partitions_are_independent(store):
    store.append([row("a"), row("b"), row("b")])
    versions = store.partitions()
    assert {name: v.row_count for name, v in versions.items()} == {"a": 1, "b": 2}
    assert versions["a"].epoch != versions["b"].epoch


def test_rows_with_a_known_key_are_skipped_and_use_no_position(store):
    assert store.append([row(key="e1"), row(key="e2"), row(key="e1")]) == 2
    assert store.append([row(key="e1"), row(key="e2")]) == 0
    assert store.head_position() == 2
    assert store.partitions()["p"].row_count == 2
    # The same key in another partition is another row.
    assert store.append([row("q", key="e1")]) == 1


def test_positions_are_never_reused_after_a_purge(store):
    store.append([row(session_id="s1"), row(session_id="s2")])
    store.purge(session_id="s2")
    store.append([row(session_id="s3")])
    assert live_positions(store) == [1, 3]
    assert store.head_position() == 3


def test_purge_then_append_back_to_the_same_count_is_not_growth(store):
    store.append([row(session_id="s1"), row(session_id="s2")])
    before = store.partitions()["p"]
    assert store.purge(session_id="s1") == {"p": 1}
    store.append([row(session_id="s3")])
    after = store.partitions()["p"]
    assert after.row_count == before.row_count
    assert not after.grew_from(before)


def test_purge_by_directory_matches_on_path_boundaries(store):
    store.append([row(directory="/w/repo"), row(directory="/w/repo/sub"),
                  row(directory="/w/repository"), row(directory="/w/other")])
    assert store.purge(directory="/w/repo/") == {"p": 2}
    assert store.partitions()["p"].row_count == 2


def test_purge_by_directory_handles_windows_paths(store):
    store.append([row(directory=r"C:\Users\me\repo"), row(directory=r"C:\Users\me\repo\x"),
                  row(directory=r"C:\Users\me\repo2")])
    assert store.purge(directory="c:/users/me/repo") == {"p": 2}


def test_purge_combines_selectors_with_and(store):
    store.append([row(source="a", session_id="s1"), row(source="a", session_id="s2"),
                  row(source="b", session_id="s1")])
    assert store.purge(source_id="a", session_id="s1") == {"p": 1}
    assert store.partitions()["p"].row_count == 2


def test_purge_before_compares_timestamps_not_text(store):
    store.append([row(ts="2025-01-01T10:00:00+02:00"),   # 08:00 UTC
                  row(ts="2025-01-01T09:00:00Z"),
                  row(ts="not a time")])
    assert store.purge(before="2025-01-01T08:30:00Z") == {"p": 1}
    assert store.partitions()["p"].row_count == 2


def test_purge_reports_only_partitions_that_lost_rows_and_leaves_others_unversioned(store):
    store.append([row("a", source="x"), row("b", source="y")])
    untouched = store.partitions()["b"]
    assert store.purge(source_id="x") == {"a": 1}
    assert store.partitions()["b"] == untouched


def test_purge_without_a_selector_is_refused(store):
    with pytest.raises(StoreError, match="at least one selector"):
        store.purge()


def test_purge_rejects_a_bad_timestamp(store):
    with pytest.raises(StoreError, match="not an ISO-8601"):
        store.purge(before="yesterday")


def test_dry_run_counts_without_deleting(store):
    store.append([row(session_id="s1")])
    version = store.partitions()["p"]
    assert store.purge(session_id="s1", dry_run=True) == {"p": 1}
    assert store.partitions()["p"] == version


def test_purge_is_one_transaction(store, monkeypatch):
    store.append([row("a", source="x"), row("b", source="x")])
    versions = store.partitions()
    import hostcore.evidence.store as store_module

    calls = []

    def failing_next_epoch(db):
        calls.append(1)
        if len(calls) == 2:  # after the delete and the first partition's update
            raise OSError("disk went away")
        return original(db)

    original = store_module._next_epoch
    monkeypatch.setattr(store_module, "_next_epoch", failing_next_epoch)
    with pytest.raises(OSError):
        store.purge(source_id="x")
    assert store.partitions() == versions
    assert len(live_positions(store)) == 2


def test_drop_partition_removes_it_and_a_new_one_gets_a_fresh_epoch(store):
    store.append([row("a"), row("a")])
    old = store.partitions()["a"]
    store.drop_partition("a")
    assert "a" not in store.partitions()
    store.append([row("a"), row("a"), row("a")])
    new = store.partitions()["a"]
    assert not new.grew_from(old)
    store.drop_partition("never-existed")


def test_source_cursor_is_persisted_with_the_rows(store, tmp_path):
    assert store.source_cursor("notes") is None
    store.append([row()], source="notes", cursor="42")
    store.append([], source="notes", cursor="43")
    store.close()
    reopened = Store(tmp_path / "store.sqlite3")
    try:
        assert reopened.source_cursor("notes") == "43"
        assert reopened.instance_id == store.instance_id
    finally:
        reopened.close()


def test_a_bad_row_rolls_back_the_whole_append(store):
    with pytest.raises(RecordError, match="evidence row 1: source_id"):
        store.append([row(), row(source="")], source="s", cursor="c")
    assert store.partitions() == {}
    assert store.source_cursor("s") is None


def test_timestamps_are_stored_in_one_canonical_utc_form(store, tmp_path):
    store.append([row(ts="2025-07-28T22:54:41.466Z"), row(ts="2025-07-29T00:54:41+02:00")])
    db = sqlite3.connect(store.path)
    try:
        stamps = [r[0] for r in db.execute("SELECT ts FROM evidence ORDER BY position")]
    finally:
        db.close()
    assert stamps == ["2025-07-28T22:54:41.466000Z", "2025-07-28T22:54:41.000000Z"]


def test_a_file_that_is_not_a_store_is_reported(tmp_path):
    bogus = tmp_path / "store.sqlite3"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not an evidence store"):
        Store(bogus)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "store.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)


def test_threads_sharing_one_store_never_interleave_transactions(store):
    import threading

    def writer(n: int) -> None:
        for i in range(50):
            store.append([row(f"t{n}", key=str(i)), row(f"t{n}", key=f"{i}b")],
                         source=f"t{n}", cursor=str(i))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {name: v.row_count for name, v in store.partitions().items()} == {
        f"t{n}": 100 for n in range(4)}
    assert store.head_position() == 400
    assert [store.source_cursor(f"t{n}") for n in range(4)] == ["49"] * 4
