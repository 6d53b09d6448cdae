"""Appending costs the same in a big store as in an empty one: every query an append
makes reads the new rows or one index entry per row, never a whole table or index.

Pinned by the query plans (no timing): a plan that scans evidence would make each
append cost grow with the store (it did: counting the new rows scanned the whole
partition index, 6 us per appended row at 2 M rows).
"""

from __future__ import annotations

import sqlite3

import pytest

from hostcore.evidence import schema
from hostcore.evidence.store import EvidenceRow, Store


@pytest.fixture
def db(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([EvidenceRow(partition=f"p{n % 3}", source_id="s", directory=f"/w/{n % 7}",
                              key=f"k{n}") for n in range(2_000)])
    store.close()
    # No ANALYZE, as in a store in use: the planner then has no statistics to
    # tell it the new rows are few.
    opened = sqlite3.connect(tmp_path / "store.sqlite3")
    yield opened
    opened.close()


def plan(db: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> str:
    return " | ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def test_counting_the_new_rows_reads_only_them(db):
    found = plan(db, schema.COUNT_NEW, (1_990,))
    assert "INTEGER PRIMARY KEY (rowid>?)" in found
    assert "SCAN" not in found


def test_checking_keys_probes_the_key_index(db):
    found = plan(db, schema.STORED_KEYS, (1, '["k1", "k2"]'))
    assert "evidence_key" in found
    assert "SCAN evidence" not in found


def test_checking_purged_keys_probes_their_primary_key(db):
    found = plan(db, schema.PURGED_DIGESTS, ('["00", "11"]',))
    assert "SCAN purged_keys" not in found



def test_a_partition_window_read_searches_only_that_window(db):
    # The capture sidecar reads a partition 50,000 positions at a time: each read
    # must seek (partition, position), never walk the partition or sort it.
    sql = schema.select_rows("p1", ["git_remote"])
    found = plan(db, sql, (1_000, 1_500, b"\x01" * 8, "p1"))
    assert "USING INDEX evidence_part (part=? AND rowid>? AND rowid<?)" in found
    assert "TEMP B-TREE" not in found

def test_a_new_store_uses_large_pages(tmp_path):
    Store(tmp_path / "store.sqlite3").close()
    db = sqlite3.connect(tmp_path / "store.sqlite3")
    try:
        assert db.execute("PRAGMA page_size").fetchone()[0] == schema.PAGE_SIZE
    finally:
        db.close()
