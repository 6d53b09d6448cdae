"""The aggregate's quarter-hour of a row is SQLite's reading of its time, the one the
delete trigger uses, including the stamps SQLite's rounding to milliseconds moves
into the next minute, and no bucket at all for a time SQLite cannot read."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from hostcore.evidence.store import EvidenceRow, Store
from hostcore.evidence.usage_fields import tokens

# Near the end of a minute, of a quarter-hour, in the middle of one; a month 13
# (the store keeps the text as it is, and SQLite reads no time in it).
STAMPS = ("2025-09-14T10:14:59.999499Z", "2025-09-14T10:14:59.999500Z",
          "2025-09-14T10:14:59.999999Z", "2025-09-14T10:14:59.900000Z",
          "2025-09-14T10:14:59.899999Z", "2025-09-14T10:14:58.999999Z",
          "2025-09-14T10:29:59.9995Z", "2025-09-14T10:44:00Z", "2025-09-14T10:07:31.5Z",
          "2025-09-14T23:59:59.999900Z", "2025-13-14T10:14:30.000000Z")


def row(n: int, ts: str) -> EvidenceRow:
    return EvidenceRow(partition="p", source_id="src", directory="/w", session_id="s",
                       ts=ts, key=f"k{n}",
                       payload={"type": "assistant", "usage": tokens("m", (1 << n, 0, 0, 0),
                                                                     f"r{n}")})


def by_bucket(path: Path, sql: str) -> dict[int, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute(sql).fetchall())


def test_each_row_is_counted_in_the_bucket_sqlite_reads_from_its_time(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(n, ts) for n, ts in enumerate(STAMPS)])
    counted = by_bucket(store.path, "SELECT bucket, SUM(input_tokens) FROM usage GROUP BY bucket")
    # Each row's own token count is a distinct power of two: the sums say which
    # rows went into which bucket.
    expected = by_bucket(store.path, "SELECT unixepoch(ts) / 900, SUM(payload ->> "
                         "'$.usage.input_tokens') FROM evidence WHERE unixepoch(ts) IS NOT NULL "
                         "GROUP BY 1")
    assert counted == expected
    # 10:14:59.9995 and later round to 10:15 and go to the next quarter-hour.
    assert counted[1757844000 // 900 + 1] & 0b110 == 0b110
    assert sum(counted.values()) == (1 << (len(STAMPS) - 1)) - 1  # the unreadable one: none
    store.purge(session_id="s")
    assert by_bucket(store.path, "SELECT bucket, input_tokens FROM usage") == {}


def test_buckets_worked_out_from_the_text_are_sqlites_for_stamps_of_every_kind(tmp_path):
    # The append works the bucket of a canonical time out from its text and asks
    # SQLite only for the rest: both must agree with SQLite's reading everywhere.
    rng = random.Random(5)
    stamps = ["2024-02-29T12:00:00.000000Z", "2025-02-29T12:00:00.000000Z",
              "2025-04-31T23:59:59.999999Z", "1969-12-31T23:52:30.000000Z",
              "1970-01-01T00:00:00.000000Z", "0001-01-01T00:14:59.999600Z",
              "9999-12-31T23:59:59.999999Z", "2025-09-14T24:00:00.000000Z",
              "2025-09-14T10:14:59.999999", "2025-09-14 10:14:59.999999Z"]
    for _ in range(400):
        minute = rng.choice([rng.randrange(60), 14, 29, 44, 59])
        stamps.append(f"{rng.choice(['1999', '2025', '2028'])}-{rng.randrange(1, 13):02d}-"
                      f"{rng.randrange(1, 32):02d}T{rng.randrange(24):02d}:{minute:02d}:"
                      f"{rng.choice([rng.randrange(60), 59]):02d}."
                      f"{rng.choice([rng.randrange(10**6), 999499, 999500, 999999]):06d}Z")
    store = Store(tmp_path / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="src", directory="/w", session_id="s",
                              ts=ts, key=f"k{n}", payload={"type": "assistant", "usage": tokens(
                                  "m", (1, 0, 0, 0), f"r{n}")})
                  for n, ts in enumerate(stamps)])
    counted = by_bucket(store.path, "SELECT bucket, SUM(responses) FROM usage GROUP BY bucket")
    expected = by_bucket(store.path, "SELECT unixepoch(ts) / 900, COUNT(*) FROM evidence "
                         "WHERE unixepoch(ts) IS NOT NULL GROUP BY 1")
    assert counted == expected
    assert sum(counted.values()) > len(stamps) // 2  # most are times SQLite reads


def test_a_batch_of_common_stamps_with_last_seconds_gets_sqlites_buckets(tmp_path):
    # Every stamp of this batch has the common shape, so staging vouches for the
    # whole batch and no stamp is matched again: the last second's .9995 must still
    # go to SQLite, which rounds it into the next minute (and quarter-hour).
    stamps = ["2025-09-14T10:14:59.9995Z", "2025-09-14T10:14:59.999Z",
              "2025-09-14T10:14:58.9999Z", "2025-09-14T10:29:59.999999Z",
              "2025-09-14T10:44:59.4Z", "2025-09-14T10:59:59Z"]
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(n, ts) for n, ts in enumerate(stamps)])
    counted = by_bucket(store.path, "SELECT bucket, SUM(input_tokens) FROM usage GROUP BY bucket")
    expected = by_bucket(store.path, "SELECT unixepoch(ts) / 900, SUM(payload ->> "
                         "'$.usage.input_tokens') FROM evidence GROUP BY 1")
    assert counted == expected
    quarter = 1757844000 // 900  # 10:00 to 10:15
    assert counted[quarter] == 0b0110 and counted[quarter + 1] == 0b0001
