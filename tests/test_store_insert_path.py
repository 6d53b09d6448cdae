"""The store's common insert path (a batch as one JSON statement per chunk) stores
exactly what it was given, in batch order, and leaves every row it cannot hold
exactly to the row-by-row path, which counts it."""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hostcore.evidence.store as store_module
from hostcore.evidence.store import EvidenceRow, Store


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
