"""The store's common insert path (a batch staged, then inserted a few thousand rows
per statement) stores exactly what it was given, in batch order, and leaves every
row it cannot hold exactly to the row-by-row path, which counts it."""

from __future__ import annotations

import gc
import sqlite3
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hostcore.evidence.store as store_module
from hostcore.errors import RecordError
from hostcore.evidence.store import EvidenceRow, SourceBatch, Store
from hostcore.evidence.transcripts import Line


def stored(store: Store) -> list[tuple[object, ...]]:
    with sqlite3.connect(store.path) as db:
        return db.execute("SELECT session_id, ts, git_remote, payload, key FROM evidence "
                          "ORDER BY position").fetchall()


def row(**fields: Any) -> EvidenceRow:
    return EvidenceRow(partition="p", source_id="s", **fields)


@pytest.mark.parametrize("field", ["session_id", "ts", "git_remote", "key"])
def test_a_nul_in_one_text_field_of_an_otherwise_fine_batch_is_counted_and_skipped(
        tmp_path, field):
    store = Store(tmp_path / "store.sqlite3")
    inserted = store.append([row(key="fine"), row(**{field: "a\0b"})], source="s")
    assert inserted == 1
    assert store.source_health()["s"].skipped == {"unencodable": 1}
    assert [r[4] for r in stored(store)] == ["fine"]


@pytest.mark.parametrize("field, value", [("session_id", {"a": 1}), ("git_remote", ["x"]),
                                          ("key", {"k": "v"}), ("session_id", 7)])
def test_a_field_that_is_not_text_is_counted_never_stored_as_json_text(tmp_path, field, value):
    store = Store(tmp_path / "store.sqlite3")
    inserted = store.append([row(key="fine"), row(**{field: value})], source="s")
    assert inserted == 1
    assert store.source_health()["s"].skipped == {"bad_value": 1}


def test_a_payload_holding_the_escape_of_nul_is_kept_exactly(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    assert store.append([row(payload={"t": "a\0b", "u": "\\u0000"}, key="k")]) == 1
    assert stored(store)[0][3] == '{"t":"a\\u0000b","u":"\\\\u0000"}'


def test_rows_keep_the_batch_order_across_statements(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "INSERT_CHUNK_ROWS", 3)
    store = Store(tmp_path / "store.sqlite3")
    keys = [f"k{n:02d}" for n in reversed(range(11))]
    assert store.append([row(key=key) for key in keys]) == 11
    assert [r[4] for r in stored(store)] == keys


def test_a_stored_key_in_a_later_chunk_keeps_the_whole_batch_out_of_the_fast_path(
        tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "INSERT_CHUNK_ROWS", 2)
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="k4")])
    assert store.append([row(key=f"k{n}") for n in range(6)]) == 5
    assert sorted(r[4] for r in stored(store)) == [f"k{n}" for n in range(6)]
    assert store.head_position() == 6  # no position was used up by the refused try


def test_a_refused_batch_goes_row_by_row_under_the_ids_that_survived_its_rollback(tmp_path):
    # The fast path's insert rolls the whole transaction back when the key index
    # refuses a row (no statement journal), the new directory's scope with it.
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="k1", directory="/old")], source="s", cursor="1")
    outcome = store.ingest("s", SourceBatch([row(key="k2", directory="/new"), row(key="k1")],
                                            "2"), previous="1")
    assert outcome.inserted == 1
    assert store.source_cursor("s") == "2"
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT e.key, s.directory FROM evidence e JOIN scopes s "
                          "ON s.id = e.scope ORDER BY e.position").fetchall() == [
            ("k1", "/old"), ("k2", "/new")]


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
               max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT, st.dictionaries(TEXT, TEXT, max_size=3)),
                min_size=1, max_size=8))
def test_any_text_comes_back_exactly_as_given(tmp_path_factory, fields):
    store = Store(tmp_path_factory.mktemp("s") / "store.sqlite3")
    rows = [row(session_id=session, ts=ts, git_remote=remote, payload=payload, key=f"{n}")
            for n, (session, ts, remote, payload) in enumerate(fields)]
    assert store.append(rows) == len(rows)
    from hostcore.timestamps import canonical

    expected = [(session, canonical(ts), remote,
                 msgspec.json.encode(payload).decode(), f"{n}")
                for n, (session, ts, remote, payload) in enumerate(fields)]
    assert stored(store) == expected
    store.close()


# -- staged batches (Store.stage, then ingest with staged=) ----------------------


def batch(rows: list[EvidenceRow], cursor: str = "c") -> SourceBatch:
    return SourceBatch(rows, cursor)


def test_a_staged_batch_is_stored_as_the_same_batch_unstaged(tmp_path):
    rows = [row(session_id=f"s{n % 3}", ts="2025-07-28T22:54:41.466Z", git_remote=f"r{n % 2}",
                directory=f"/w/{n % 4}", payload={"n": n}, key=f"k{n}") for n in range(50)]
    staged_store = Store(tmp_path / "staged.sqlite3")
    plain_store = Store(tmp_path / "plain.sqlite3")
    staged_store.ingest("s", batch(rows), previous=None, staged=staged_store.stage(rows))
    plain_store.ingest("s", batch(list(rows)), previous=None)
    assert stored(staged_store) == stored(plain_store)
    assert staged_store.stats() == plain_store.stats()


def test_runs_of_rows_staged_by_name_each_get_their_own_ids(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="seed", directory="/w/1")])  # cached: staged by id
    rows = [EvidenceRow(partition=f"p{n // 20}", source_id="s", directory=f"/w/{n // 7 % 3}",
                        key=f"k{n}") for n in range(60)]
    staged = store.stage(rows)
    assert staged is not None and len(staged.named) > 1
    store.ingest("s", batch(rows), previous=None, staged=staged)
    with sqlite3.connect(store.path) as db:
        found = db.execute("SELECT p.name, s.directory, e.key FROM evidence e JOIN partitions p "
                           "ON p.id = e.part JOIN scopes s ON s.id = e.scope "
                           "WHERE e.key != 'seed' ORDER BY e.position").fetchall()
    assert found == [(r.partition, r.directory, r.key) for r in rows]
    assert {name: v.row_count for name, v in store.partitions().items()} == {
        "p": 1, "p0": 20, "p1": 20, "p2": 20}


def test_staging_needs_neither_the_file_nor_the_store_open(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.close()
    staged = store.stage([row(key="k", directory="/w")])
    assert staged is not None
    # Nothing cached: by name, for the transaction to give ids.
    assert (staged.params[:2], staged.named, staged.ids) == (["p", ("/w", "s")], [(0, 7)], {})


def test_ids_that_moved_between_staging_and_storing_are_never_written(tmp_path):
    # Another process drops the partition after this one cached its id and staged
    # a batch: the rows must land in the partition as it is now, not the old id.
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="before", directory="/w")])
    rows = [row(key="after", directory="/w")]
    staged = store.stage(rows)
    other = Store(tmp_path / "store.sqlite3")
    other.drop_partition("p")
    other.close()
    store.ingest("s", batch(rows), previous=None, staged=staged)
    assert store.partitions()["p"].row_count == 1
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT p.name, s.directory FROM evidence e JOIN partitions p ON "
                          "p.id = e.part JOIN scopes s ON s.id = e.scope").fetchall() == [
            ("p", "/w")]


def test_a_batch_staged_after_its_names_were_met_carries_their_ids(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="first", directory="/w")])
    rows = [row(key="second", directory="/w"), row(key="third", directory="/w")]
    staged = store.stage(rows)
    assert staged is not None and staged.named == []
    part, scope = staged.params[:2]
    assert staged.ids == {"p": part, ("/w", "s"): scope}
    store.ingest("s", batch(rows), previous=None, staged=staged)
    assert [r[4] for r in stored(store)] == ["first", "second", "third"]
    assert store.partitions()["p"].row_count == 3


def test_a_scope_cached_while_its_batch_was_staged_counts_each_row_once(
        tmp_path, monkeypatch):
    # Another thread of an embedding process can cache ids while one stages: one
    # batch can meet a directory by name, then by id. Both must add up in the tuple
    # counts.
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="seed", directory="/a")])
    scope_id = store._scope_ids.pop(("/a", "s"))

    class CachedAfterFirstLook(dict):
        looked = False

        def get(self, key, default=None):
            if key == ("/a", "s") and not self.looked:
                self.looked = True
                return default
            return scope_id if key == ("/a", "s") else super().get(key, default)

    monkeypatch.setattr(store, "_scope_ids", CachedAfterFirstLook(store._scope_ids))
    rows = [row(key="1", directory="/a"), row(key="2", directory="/b"),
            row(key="3", directory="/a")]
    staged = store.stage(rows)
    assert staged is not None and staged.named == [(0, 7), (7, 14)]
    store.ingest("s", batch(rows), previous=None, staged=staged)
    with sqlite3.connect(store.path) as db:
        counted = db.execute("SELECT s.directory, t.rows FROM tuples t JOIN scopes s "
                             "ON s.id = t.scope ORDER BY t.id").fetchall()
    assert counted == [("/a", 3), ("/b", 1)]
    assert store.stats()["rows"] == 4


def test_a_staged_batch_gives_the_cycle_collector_nothing_per_row(tmp_path):
    # Collections triggered by thousands of tracked objects per batch cost a tenth
    # of an ingest: rows are untracked, and staging makes no object per row.
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="seed", directory="/w")])
    rows = [row(key=f"k{n}", directory="/w") for n in range(1_000)]
    staged = store.stage(rows)
    assert staged is not None
    assert not any(gc.is_tracked(r) for r in rows)
    assert not any(gc.is_tracked(value) for value in staged.params)
    assert not gc.is_tracked(Line(0, b"{}", False, 3))


@pytest.mark.parametrize("field, value", [("partition", 5), ("source_id", ["s"]),
                                          ("directory", 7)])
def test_a_name_that_is_not_text_is_counted_and_never_given_an_id(tmp_path, field, value):
    store = Store(tmp_path / "store.sqlite3")
    rows = [row(key="fine"), EvidenceRow(**{"partition": "p", "source_id": "s", "key": "odd",
                                           field: value})]
    assert store.stage(rows) is None
    outcome = store.ingest("s", batch(rows), previous=None, staged=None)
    assert (outcome.inserted, outcome.rejected) == (1, {"unencodable": 1})


def test_a_source_id_that_is_not_text_is_counted_without_naming_a_source(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    assert store.append([row(key="fine"), EvidenceRow(partition="p", source_id=["s"])]) == 1
    assert store.source_health() == {}
    assert [r[4] for r in stored(store)] == ["fine"]


def test_a_batch_that_cannot_be_staged_is_checked_row_by_row(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    rows = [row(key="fine"), row(key="bad", session_id="a\0b")]
    assert store.stage(rows) is None
    outcome = store.ingest("s", batch(rows), previous=None, staged=None)
    assert (outcome.inserted, outcome.rejected) == (1, {"unencodable": 1})


def test_values_staged_from_other_rows_are_not_used(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    other = store.stage([row(key="other")])
    store.ingest("s", batch([row(key="mine")]), previous=None, staged=other)
    assert [r[4] for r in stored(store)] == ["mine"]


def test_a_row_that_is_not_an_evidence_row_is_refused_whether_staged_or_not(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    rows: list[Any] = [row(key="k"), {"partition": "p"}]
    assert store.stage(rows) is None
    with pytest.raises(RecordError, match="evidence row 1"):
        store.ingest("s", batch(rows), previous=None, staged=store.stage(rows))
    assert stored(store) == []


def test_a_batch_is_a_few_statements_whatever_its_rows_and_tuples(tmp_path, monkeypatch):
    # A batch's rows and its tuples' counts go in by the statement, never by the
    # row, and the rows are never read back to count them. The 500
    # rows short of a chunk go in statements of a power of two rows each (256, 128,
    # 64, 32, 16, 4), whose texts the statement cache keeps: a few, not 500.
    monkeypatch.setattr(store_module, "INSERT_CHUNK_ROWS", 1_000)
    store = Store(tmp_path / "store.sqlite3")

    def rows(start: int) -> list[EvidenceRow]:
        return [row(key=f"k{n}", directory=f"/w/{n % 40}", git_remote=f"r{n % 7}")
                for n in range(start, start + 2_500)]

    first = rows(0)
    store.ingest("s", batch(first), previous=None, staged=store.stage(first))
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    second = rows(2_500)
    store.ingest("s", batch(second, "c2"), previous="c", staged=store.stage(second))
    inserts = [s for s in seen if s.startswith("INSERT OR ROLLBACK INTO evidence")]
    assert [s.count("'k") for s in inserts] == [1_000, 1_000, 256, 128, 64, 32, 16, 4]
    # 280 tuples (40 folders by 7 remotes): 256 + 16 + 8.
    assert sum(s.startswith("INSERT INTO tuples") for s in seen) == 3
    assert not [s for s in seen if "FROM evidence" in s]
    assert len(seen) <= 20
    assert store.stats()["rows"] == 5_000


def counted_tuples(store: Store) -> list[tuple[object, ...]]:
    """The tuples table in id order, named, beside what the rows themselves say."""
    with sqlite3.connect(store.path) as db:
        table = db.execute("SELECT p.name, s.directory, t.git_remote, t.rows FROM tuples t "
                           "JOIN partitions p ON p.id = t.part JOIN scopes s ON s.id = t.scope "
                           "ORDER BY t.id").fetchall()
        rows = db.execute("SELECT p.name, s.directory, e.git_remote, COUNT(*) FROM evidence e "
                          "JOIN partitions p ON p.id = e.part JOIN scopes s ON s.id = e.scope "
                          "GROUP BY e.part, e.scope, e.git_remote "
                          "ORDER BY MIN(e.position)").fetchall()
    assert table == rows
    return table


def test_tuples_counted_while_staged_are_the_rows_stored_in_order_of_first_row(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    # Runs of remotes that come back, a directory met again after another, and
    # partitions and scopes new to the store (staged by name), then the same by id.
    def rows(start: int) -> list[EvidenceRow]:
        layout = [("p", "/a", "r1"), ("p", "/a", "r1"), ("p", "/a", "r2"), ("q", "/a", "r1"),
                  ("p", "/b", "r1"), ("p", "/a", "r1"), ("p", "/a", "r2")]
        return [EvidenceRow(partition=part, source_id="s", directory=directory,
                            git_remote=remote, key=f"k{start + at}")
                for at, (part, directory, remote) in enumerate(layout)]

    first = rows(0)
    assert store.stage(first).named  # nothing cached yet
    store.ingest("s", batch(first), previous=None, staged=store.stage(first))
    assert counted_tuples(store) == [("p", "/a", "r1", 3), ("p", "/a", "r2", 2),
                                     ("q", "/a", "r1", 1), ("p", "/b", "r1", 1)]
    second = rows(7)
    assert not store.stage(second).named
    store.ingest("s", batch(second, "c2"), previous="c", staged=store.stage(second))
    assert counted_tuples(store) == [("p", "/a", "r1", 6), ("p", "/a", "r2", 4),
                                     ("q", "/a", "r1", 2), ("p", "/b", "r1", 2)]
    assert store.partitions()["p"].row_count == 12
    assert store.partitions()["q"].row_count == 2


def test_a_batch_a_purge_left_rows_out_of_counts_only_the_rows_stored(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(key="gone", directory="/a")], source="s")
    store.purge(directory="/a")
    again = [row(key="gone", directory="/a", git_remote="r"),
             row(key="new", directory="/a", git_remote="r"),
             row(key="other", directory="/b", git_remote="r")]
    store.ingest("s", batch(again), previous=None, staged=store.stage(again))
    assert [t[1:] for t in counted_tuples(store)] == [("/a", "r", 1), ("/b", "r", 1)]


def test_a_sqlite_built_for_fewer_parameters_gets_smaller_statements(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store._db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 30)  # four rows of seven
    keys = [f"k{n:02d}" for n in range(11)]
    assert store.append([row(key=key, git_remote=key) for key in keys]) == 11
    assert [r[4] for r in stored(store)] == keys
