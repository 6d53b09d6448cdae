"""The export seam's read contract: projection, order, partitions, errors, streaming."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import pytest

from hostcore.evidence.seam import COLUMNS, ExportSeam, SeamError
from hostcore.evidence.store import EvidenceRow, Store


def rows(n: int, partition: str = "p", **fields: object) -> list[EvidenceRow]:
    return [EvidenceRow(partition=partition, source_id="s", session_id=f"k{i}",
                        payload={"i": i}, **fields) for i in range(n)]  # type: ignore[arg-type]


def test_every_column_projects_in_the_asked_order(make_host):
    host = make_host()
    host.store.append([EvidenceRow(partition="p", source_id="src", session_id="k",
                                   ts="2025-01-01T00:00:00Z", directory="/d",
                                   git_remote="git@h:o/r.git", payload={"a": 1}, key="e")])
    (row,) = host.seam.read_rows_since_sync(None, 0, list(reversed(COLUMNS)))
    assert row == (1, "e", '{"a":1}', "git@h:o/r.git", "/d", "2025-01-01T00:00:00.000000Z",
                   "k", "src", "p")
    assert json.loads(row[2]) == {"a": 1}
    assert list(host.seam.read_rows_since_sync(None, 0, [])) == [(1,)]


def test_reads_after_the_cursor_within_one_partition(make_host):
    host = make_host()
    host.store.append(rows(3, "a") + rows(3, "b") + rows(2, "a"))
    assert [r[0] for r in host.seam.read_rows_since_sync("a", 2, [])] == [3, 7, 8]
    assert [r[0] for r in host.seam.read_rows_since_sync(None, 6, ["partition"])] == [7, 8]
    assert list(host.seam.read_rows_since_sync("missing", 0, [])) == []


def test_an_unknown_column_is_a_clear_error(make_host):
    host = make_host()
    with pytest.raises(SeamError, match=r"unknown column.*'content'.*offers"):
        host.seam.read_rows_since_sync(None, 0, ["git_remote", "content"])
    with pytest.raises(SeamError, match="not one string"):
        host.seam.read_rows_since_sync(None, 0, "git_remote")

    async def first():
        async for row in host.seam.read_rows_since(None, 0, ["position"]):
            return row

    with pytest.raises(SeamError, match="'position'"):
        asyncio.run(first())


def test_a_negative_cursor_is_refused(make_host):
    with pytest.raises(SeamError, match="cursor"):
        make_host().seam.read_rows_since_sync(None, -1, [])


def test_the_async_read_lets_other_tasks_run_between_chunks(tmp_path, make_host):
    host = make_host()
    host.store.append(rows(50))
    seam = ExportSeam(host.store, host.policy, fetch_rows=10)
    ticks = []

    async def other():
        for _ in range(10):
            ticks.append(1)
            await asyncio.sleep(0)

    async def read():
        task = asyncio.create_task(other())
        seen = [r async for r in seam.read_rows_since(None, 0, ["session_id"])]
        await task
        return seen

    seen = asyncio.run(read())
    assert len(seen) == 50
    assert len(ticks) == 10


def test_a_read_sees_one_snapshot_while_writers_append_and_purge(make_host):
    host = make_host()
    host.store.append(rows(30))
    seam = ExportSeam(host.store, host.policy, fetch_rows=5)
    reader = seam.read_rows_since_sync(None, 0, ["session_id"])
    first = [next(reader) for _ in range(5)]
    host.store.append(rows(10))
    host.store.purge(session_id="k20")
    rest = list(reader)
    assert [r[0] for r in first + rest] == list(range(1, 31))


def test_an_abandoned_read_does_not_block_writers(make_host):
    host = make_host()
    host.store.append(rows(20))
    reader = ExportSeam(host.store, host.policy, fetch_rows=2).read_rows_since_sync(
        None, 0, [])
    next(reader)
    del reader
    assert host.store.append(rows(1)) == 1
    assert host.store.purge(session_id="k0") == {"p": 2}


def _peak(store: Store, policy, count: int) -> int:
    seam = ExportSeam(store, policy, fetch_rows=256)
    tracemalloc.start()
    tracemalloc.reset_peak()
    seen = sum(1 for _ in seam.read_rows_since_sync(None, store.head_position() - count,
                                                    ["git_remote", "payload"]))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seen == count
    return peak


def test_memory_does_not_grow_with_the_rows_read(make_host):
    host = make_host()
    for _ in range(8):
        host.store.append(rows(5_000, git_remote="git@github.com:owner/repository.git"))
    small = _peak(host.store, host.policy, 4_000)
    large = _peak(host.store, host.policy, 40_000)
    assert large < small * 1.5


def test_the_store_offers_no_public_way_to_read_rows():
    public = {name for name in vars(Store) if not name.startswith("_")}
    # ingest/record_failure write; stage works in memory on rows given to it;
    # source_health reads counts, replaced stats the file, directories reads the
    # scopes table, source_ids the source names in it; never a row.
    assert public == {"append", "ingest", "stage", "record_failure", "purge", "drop_partition",
                      "partitions", "source_cursor", "source_health", "head_position",
                      "stats", "close", "replaced", "directories", "source_ids"}
