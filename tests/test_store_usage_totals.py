"""The usage aggregate is added by the append that inserts the rows, in their
transaction: only rows actually stored count, one response counts once across
batches, paths and files, and purges and partition drops take tokens out again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from hostcore.evidence.store import EvidenceRow, SourceBatch, Store
from hostcore.evidence.usage_fields import tokens
from hostcore.evidence.usage_totals import note, tally

SESSION = "s-1"


def usage_row(response: str, counts: tuple[int, int, int, int], *, key: str | None,
              ts: str = "2025-09-14T10:05:00Z", model: str = "m", partition: str = "p",
              directory: str = "/w") -> EvidenceRow:
    return EvidenceRow(partition=partition, source_id="src", directory=directory,
                       session_id=SESSION, ts=ts, key=key,
                       payload={"type": "assistant", "usage": tokens(model, counts, response)})


def plain_row(key: str) -> EvidenceRow:
    return EvidenceRow(partition="p", source_id="src", directory="/w", session_id=SESSION,
                       ts="2025-09-14T10:05:00Z", key=key, payload={"type": "user"})


def aggregate(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT model, bucket, responses, input_tokens, output_tokens, "
                          "cache_creation_input_tokens, cache_read_input_tokens, above_tier "
                          "FROM usage ORDER BY model, bucket").fetchall()


def recount(path: Path) -> list[tuple[Any, ...]]:
    """What the aggregate must hold: every stored row's response counted once, by
    the first stored row naming it, summed per model and bucket in SQL."""
    with sqlite3.connect(path) as db:
        return db.execute(
            "WITH firsts AS (SELECT payload ->> '$.usage.model' AS model, "
            "unixepoch(ts) / 900 AS bucket, payload AS p FROM evidence e "
            "WHERE payload -> '$.usage' IS NOT NULL AND position = (SELECT MIN(position) "
            "FROM evidence f WHERE f.payload ->> '$.usage.response' "
            "= e.payload ->> '$.usage.response')) "
            "SELECT model, bucket, COUNT(*), SUM(p ->> '$.usage.input_tokens'), "
            "SUM(p ->> '$.usage.output_tokens'), "
            "SUM(p ->> '$.usage.cache_creation_input_tokens'), "
            "SUM(p ->> '$.usage.cache_read_input_tokens') "
            "FROM firsts GROUP BY model, bucket ORDER BY model, bucket").fetchall()


def test_a_response_repeated_on_lines_of_one_batch_counts_once(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (10, 20, 30, 40), key="a"),
                  usage_row("r1", (10, 20, 30, 40), key="b"),
                  plain_row("c"),
                  usage_row("r2", (1, 2, 3, 4), key="d")])
    assert aggregate(store.path) == [("m", 1757844000 // 900, 2, 11, 22, 33, 44, "[0,0,0,0]")]


def test_a_response_seen_by_an_earlier_batch_does_not_count_again(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.ingest("src", SourceBatch([usage_row("r1", (5, 5, 5, 5), key="a")], "1"),
                 previous=None)
    # The same response in another file (a resumed session's copy), under another key.
    store.ingest("src", SourceBatch([usage_row("r1", (5, 5, 5, 5), key="copy"),
                                     usage_row("r2", (1, 0, 0, 0), key="b")], "2"),
                 previous="1")
    assert aggregate(store.path)[0][2:7] == (2, 6, 5, 5, 5)


def test_a_batch_whose_responses_were_all_counted_before_adds_nothing(tmp_path):
    # The append sums a batch's responses as if all were new, then takes out those
    # counted before: a bucket left with none must not be written at all.
    store = Store(tmp_path / "store.sqlite3")
    store.ingest("src", SourceBatch([usage_row("r1", (5, 5, 5, 5), key="a"),
                                     usage_row("r2", (1, 2, 3, 4), key="b",
                                               model="other")], "1"), previous=None)
    before = aggregate(store.path)
    store.ingest("src", SourceBatch([usage_row("r2", (1, 2, 3, 4), key="b-copy",
                                               model="other"),
                                     usage_row("r1", (5, 5, 5, 5), key="a-copy")], "2"),
                 previous="1")
    assert aggregate(store.path) == before
    assert [row[2:7] for row in before] == [(1, 5, 5, 5, 5), (1, 1, 2, 3, 4)]
    assert store.stats()["rows"] == 4


def test_rows_refused_as_duplicates_add_no_tokens(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (7, 0, 0, 0), key="a")])
    # The stored key sends the batch row by row; its refused row must not count r9.
    inserted = store.append([usage_row("r9", (100, 0, 0, 0), key="a"),
                             usage_row("r2", (3, 0, 0, 0), key="b"),
                             usage_row("r3", (4, 0, 0, 0), key="b")])
    assert inserted == 1
    assert aggregate(store.path)[0][2:4] == (2, 10)
    assert aggregate(store.path)[0][2:7] == recount(store.path)[0][2:7]


def test_rows_a_purge_recorded_add_no_tokens_when_read_again(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (7, 0, 0, 0), key="a"), plain_row("x")])
    store.purge(session_id=SESSION)
    assert aggregate(store.path) == []
    # Read again beside a new row: the purged key stays out, and so do its tokens.
    assert store.append([usage_row("r1", (7, 0, 0, 0), key="a"),
                         usage_row("r5", (2, 0, 0, 0), key="n")]) == 1
    assert [line[2:4] for line in aggregate(store.path)] == [(1, 2)]


def test_a_purge_takes_a_response_out_and_a_later_copy_counts_it_again(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (7, 1, 0, 0), key="a", directory="/w/one")])
    store.purge(directory="/w/one")
    assert aggregate(store.path) == []
    store.append([usage_row("r1", (7, 1, 0, 0), key="again", directory="/w/two")])
    assert aggregate(store.path)[0][2:5] == (1, 7, 1)


def test_dropping_a_partition_takes_its_tokens_out(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (7, 0, 0, 0), key="a", partition="old"),
                  usage_row("r2", (9, 0, 0, 0), key="b", partition="new")])
    store.drop_partition("old")
    assert [line[2:4] for line in aggregate(store.path)] == [(1, 9)]


def test_tokens_above_the_tier_add_up_per_bucket_and_come_out_with_a_purge(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    big = 250_000
    store.append([usage_row("r1", (big, 0, 0, 0), key="a", directory="/w/a"),
                  usage_row("r2", (big + 10, 0, 0, 0), key="b", directory="/w/a")])
    store.append([usage_row("r3", (big + 5, 0, 0, 0), key="c", directory="/w/a")])
    with sqlite3.connect(store.path) as db:
        (above,) = db.execute("SELECT above_tier FROM usage").fetchone()
    assert above == "[150015,0,0,0]"
    store.purge(before="2100-01-01T00:00:00Z", directory="/w/a")
    assert aggregate(store.path) == []


def test_models_and_quarter_hours_are_kept_apart_and_purged_from_where_they_went(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (1, 0, 0, 0), key="a", ts="2025-09-14T10:14:59.999999Z"),
                  usage_row("r2", (2, 0, 0, 0), key="b", ts="2025-09-14T10:15:00Z"),
                  usage_row("r0", (8, 0, 0, 0), key="z", ts="2025-09-14T10:14:59.9Z"),
                  usage_row("r3", (4, 0, 0, 0), key="c", model="other")])
    found = aggregate(store.path)
    # SQLite reads 10:14:59.999999 as 10:15:00.000 (milliseconds): the bucket the
    # delete trigger will look in, so the aggregate files it there too.
    assert [(m, b, n) for m, b, _, n, *_ in found] == [
        ("m", 1757844000 // 900, 8), ("m", 1757844000 // 900 + 1, 3),
        ("other", 1757844000 // 900, 4)]
    assert [line[:7] for line in found] == recount(store.path)
    store.purge(session_id=SESSION)
    assert aggregate(store.path) == []


def test_a_usage_payload_of_another_shape_is_stored_and_not_counted(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    odd = EvidenceRow(partition="p", source_id="src", directory="/w", session_id=SESSION,
                      ts="2025-09-14T10:05:00Z", key="odd",
                      payload={"usage": {"model": "m", "response": "r", "input_tokens": "9"}})
    assert store.append([odd, usage_row("r2", (3, 0, 0, 0), key="b")]) == 2
    assert [line[2:4] for line in aggregate(store.path)] == [(1, 3)]


WRITER = """
import sys
from hostcore.evidence.store import EvidenceRow, Store
from hostcore.evidence.usage_fields import tokens
from hostcore.evidence.usage_totals import note, tally
store = Store(sys.argv[1])
n = 0
while True:
    rows = [EvidenceRow(partition="p", source_id="src", directory="/w", session_id="s",
                        ts="2025-09-14T10:05:00Z", key=f"k{n}-{i}",
                        payload={"usage": tokens("m", (1, 2, 3, 4), f"r{n}-{i // 2}")})
            for i in range(2_000)]
    store.append(rows)
    n += 1
    if n == 3:
        print("ready", flush=True)
"""


def test_a_writer_killed_mid_append_leaves_rows_and_aggregate_agreeing(tmp_path):
    path = tmp_path / "store.sqlite3"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM evidence").fetchone()
    assert rows >= 3 * 2_000 and rows % 2_000 == 0
    assert aggregate(path)[0][2:7] == (rows // 2, rows // 2, rows, rows * 3 // 2, rows * 2)
    assert [line[:7] for line in aggregate(path)] == recount(path)


def test_buckets_and_responses_split_over_statements_count_each_response_once(
        tmp_path, monkeypatch):
    import hostcore.evidence.usage_totals as usage_totals

    # Two buckets and two responses a statement: a batch's take several.
    monkeypatch.setattr(usage_totals, "_CHUNK_ROWS", 2)
    monkeypatch.setattr(usage_totals, "_RESPONSE_CHUNK_ROWS", 2)
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (1, 0, 0, 0), key="a")])
    store.append([usage_row(f"r{n}", (n, 0, 0, 0), key=f"k{n}", model=f"m{n % 3}",
                            ts=f"2025-09-14T1{n % 4}:05:00Z") for n in range(7)])
    assert [found[:7] for found in aggregate(store.path)] == recount(store.path)
    assert sum(found[2] for found in aggregate(store.path)) == 7  # r1 once
    assert sum(found[3] for found in aggregate(store.path)) == 21


def test_a_response_named_by_any_text_counts_once_across_batches(tmp_path):
    # A name that JSON escapes (quotes, backslashes, a newline, non-ASCII) is recorded
    # as itself, however the batch's names reach SQLite.
    names = ['r"1', "r\\2", "r\n3", "réponse-4", "[5]"]
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row(name, (1, 0, 0, 0), key=f"a{n}") for n, name in enumerate(names)])
    store.append([usage_row(name, (1, 0, 0, 0), key=f"b{n}") for n, name in enumerate(names)])
    with sqlite3.connect(store.path) as db:
        assert sorted(r for (r,) in db.execute("SELECT response FROM usage_responses")) == sorted(
            names)
    assert aggregate(store.path)[0][2:4] == (5, 5)
    assert [found[:7] for found in aggregate(store.path)] == recount(store.path)


def test_a_staged_tally_holds_when_other_rows_of_the_batch_name_a_new_folder(tmp_path):
    # The usage rows' scopes were cached ids when staged; a row of a folder met for the
    # first time is staged by name beside them: the staged sums still go in as they are.
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (1, 0, 0, 0), key="a")])
    second = [EvidenceRow(partition="p", source_id="src", directory="/new", session_id=SESSION,
                          ts="2025-09-14T10:05:00Z", key="n", payload={"type": "user"}),
              usage_row("r2", (2, 0, 0, 0), key="b"), usage_row("r1", (1, 0, 0, 0), key="c")]
    staged = store.stage(second)
    assert staged is not None and staged.named and staged.tally is not None
    store.ingest("src", SourceBatch(second, "2"), previous=None, staged=staged)
    assert [found[:7] for found in aggregate(store.path)] == recount(store.path)
    assert aggregate(store.path)[0][2:4] == (2, 3)


def by_folder(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT s.directory, u.responses, u.input_tokens FROM usage u "
                          "JOIN scopes s ON s.id = u.scope ORDER BY s.directory").fetchall()


def ingest_staged_by_name(store: Store, batch: list[EvidenceRow], cursor: str) -> None:
    """Stage ``batch`` (some of its scopes new to ``store``, so staged by name, and its
    usage summed while staged) and ingest it with that staging."""
    staged = store.stage(batch)
    assert staged is not None and staged.named and staged.tally is not None
    store.ingest("src", SourceBatch(batch, cursor), previous=None, staged=staged)


def test_a_batch_of_new_folders_is_summed_while_staged_and_filed_under_their_ids(tmp_path):
    # A fresh store caches no scope: every row is staged by name, and the staged sums
    # go in under the ids the append makes for those names.
    store = Store(tmp_path / "store.sqlite3")
    batch = [usage_row("r1", (1, 0, 0, 0), key="a", directory="/one"),
             usage_row("r2", (2, 0, 0, 0), key="b", directory="/two"),
             usage_row("r3", (4, 0, 0, 0), key="c", directory="/one")]
    ingest_staged_by_name(store, batch, "1")
    assert by_folder(store.path) == [("/one", 2, 5), ("/two", 1, 2)]


def test_a_response_counted_before_comes_out_of_a_folder_staged_by_name(tmp_path):
    # r1 was counted by an earlier batch; its copy in a folder new to the store is not
    # counted again, though the staged sums of that folder held it.
    store = Store(tmp_path / "store.sqlite3")
    store.append([usage_row("r1", (1, 0, 0, 0), key="a")])
    batch = [usage_row("r1", (1, 0, 0, 0), key="b", directory="/new"),
             usage_row("r2", (8, 0, 0, 0), key="c", directory="/new")]
    ingest_staged_by_name(store, batch, "2")
    assert by_folder(store.path) == [("/new", 1, 8), ("/w", 1, 1)]


def test_a_scope_staged_by_name_and_by_id_in_one_batch_is_one_bucket(tmp_path):
    # Staging reads the id cache without the store's lock: a scope cached halfway
    # through a batch has rows staged under its name and under its id.
    usage = [tokens("m", (n, 0, 0, 0), f"r{n}") for n in (1, 2, 4)]
    ts = "2025-09-14T10:05:00.000000Z"
    found = tally(note([(0, ("/w", "src"), SESSION, ts, usage[0]),
                        (1, 7, SESSION, ts, usage[1]),
                        (2, ("/w", "src"), SESSION, ts, usage[2])]))
    assert found is not None and len(found.totals) == 2
    merged = found.rescoped({("/w", "src"): 7})
    assert list(merged.totals.values()) == [[3, 7, 0, 0, 0, 0, 0, 0, 0]]
    assert merged.firsts == found.firsts


def test_a_rows_usage_is_stored_as_the_json_of_its_fields_in_their_order():
    # Stored payloads keep one form across releases: a usage above the tier adds
    # its excess per kind, one below it carries none.
    encode = msgspec.json.encode
    assert encode(tokens("m", (1, 2, 3, 4), "r")) == (
        b'{"model":"m","response":"r","input_tokens":1,"output_tokens":2,'
        b'"cache_creation_input_tokens":3,"cache_read_input_tokens":4}')
    assert encode(tokens("m", (200_001, 2, 3, 250_000), "r")).endswith(
        b'"cache_read_input_tokens":250000,"above_tier":[1,0,0,50000]}')


def test_a_usage_given_as_a_dict_of_the_same_fields_counts_as_its_struct_does(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    as_dict = msgspec.to_builtins(tokens("m", (5, 6, 7, 8), "r-dict"))
    assert isinstance(as_dict, dict)
    rows = [usage_row("r-struct", (1, 2, 3, 4), key="a"),
            EvidenceRow(partition="p", source_id="src", directory="/w", session_id=SESSION,
                        ts="2025-09-14T10:05:00Z", key="b",
                        payload={"type": "assistant", "usage": as_dict})]
    assert store.append(rows) == 2
    assert [line[2:7] for line in aggregate(store.path)] == [(2, 6, 8, 10, 12)]
    assert [found[:7] for found in aggregate(store.path)] == recount(store.path)
