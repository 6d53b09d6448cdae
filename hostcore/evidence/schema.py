"""The evidence store's schema: its tables, and the statements more than one module uses.

The tables are created here and nowhere else, and every statement the export
seam reads through lives here. The store's own writes (appends, purges,
partition drops, health and cursors) are written beside the code that runs them
in :mod:`hostcore.evidence.store`; no module but these two names a table. Layout
(see ``docs/evidence.md``)::

    meta(key, value)                       instance id, schema, epoch and purge sequences
    partitions(id, name, epoch, row_count)
    scopes(id, directory, source_id)       distinct (directory, source) pairs
    evidence(position, part, scope, session_id, ts, git_remote, payload, key)
    tuples(id, part, scope, git_remote, rows)   distinct (partition, scope, remote), counted
    source_cursors(source, cursor)
    source_health(source, skipped, failures, last_error, last_error_at)
    purged_keys(digest)                    what purges removed, so it is never stored again

Reads filter withheld rows inside SQLite: a row's scope id indexes a blob of one
byte per scope (``substr(?, scope + 1, 1) = x'01'``), built by the seam from the
policy's verdicts.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hostcore.digests import blake2b
from hostcore.errors import HostcoreError
from hostcore.files import ensure_dir, open_state_file

# 2: purged_keys and source_health. A store at 2 refuses hostcore releases that
# know only 1, which would store purged rows again.
VERSION = 2
# How long a writer waits for another process's transaction (milliseconds).
BUSY_TIMEOUT_MS = 10_000

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS partitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    epoch INTEGER NOT NULL,
    row_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS scopes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    directory TEXT NOT NULL,
    source_id TEXT NOT NULL,
    UNIQUE (directory, source_id)
);
CREATE TABLE IF NOT EXISTS evidence (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    part INTEGER NOT NULL,
    scope INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    git_remote TEXT NOT NULL,
    payload TEXT NOT NULL,
    key TEXT
);
CREATE INDEX IF NOT EXISTS evidence_part ON evidence (part);
CREATE INDEX IF NOT EXISTS evidence_scope ON evidence (scope);
CREATE UNIQUE INDEX IF NOT EXISTS evidence_key ON evidence (part, key) WHERE key IS NOT NULL;
CREATE TABLE IF NOT EXISTS source_cursors (source TEXT PRIMARY KEY, cursor TEXT);
CREATE TABLE IF NOT EXISTS tuples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    part INTEGER NOT NULL,
    scope INTEGER NOT NULL,
    git_remote TEXT NOT NULL,
    rows INTEGER NOT NULL,
    UNIQUE (part, scope, git_remote)
);
CREATE TABLE IF NOT EXISTS source_health (
    source TEXT PRIMARY KEY,
    skipped TEXT NOT NULL,
    failures INTEGER NOT NULL,
    last_error TEXT,
    last_error_at TEXT
);
CREATE TABLE IF NOT EXISTS purged_keys (digest TEXT PRIMARY KEY) WITHOUT ROWID
"""

# Usage: what ``hostcore usage`` reads instead of rows (hostcore.evidence.usage).
# An append adds a batch's usage in Python, from the rows it actually inserted,
# in the rows' own transaction (hostcore.evidence.usage_totals): a trigger would
# parse each usage row's payload once per field. A trigger takes it out again as
# rows are deleted (purges, partition drops), which is rare. One API response
# counts once however many rows repeat it: ``usage_responses`` names each by the
# position of the row that counted it, and deleting that row takes its tokens out.
# Buckets are a quarter of an hour of UTC (every zone's offset is a whole number
# of them), so a report can be cut into days of any zone. These only add tables:
# a store that has them is still schema 2 to a release that has never heard of
# them. ``usage_counted`` was the insert trigger of the first release with usage;
# dropped so rows are not counted twice.
USAGE_DDL = (
    """CREATE TABLE IF NOT EXISTS usage (
    scope INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    responses INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_creation_input_tokens INTEGER NOT NULL,
    cache_read_input_tokens INTEGER NOT NULL,
    above_tier TEXT NOT NULL,
    PRIMARY KEY (scope, session_id, model, bucket)
) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS usage_responses (response TEXT PRIMARY KEY, "
    "position INTEGER NOT NULL) WITHOUT ROWID",
    "DROP TRIGGER IF EXISTS usage_counted",
    f"""CREATE TRIGGER IF NOT EXISTS usage_uncounted AFTER DELETE ON evidence
WHEN instr(old.payload, '"usage":{{') > 0
    AND EXISTS (SELECT 1 FROM usage_responses
                WHERE response = old.payload ->> '$.usage.response'
                AND position = old.position)
BEGIN
    DELETE FROM usage_responses WHERE response = old.payload ->> '$.usage.response';
    UPDATE usage SET
        responses = responses - 1,
        input_tokens = input_tokens - (old.payload ->> '$.usage.input_tokens'),
        output_tokens = output_tokens - (old.payload ->> '$.usage.output_tokens'),
        cache_creation_input_tokens = cache_creation_input_tokens
            - (old.payload ->> '$.usage.cache_creation_input_tokens'),
        cache_read_input_tokens = cache_read_input_tokens
            - (old.payload ->> '$.usage.cache_read_input_tokens'),
        above_tier = CASE WHEN old.payload -> '$.usage.above_tier' IS NULL THEN above_tier
            ELSE json_array((above_tier ->> 0) - (old.payload ->> '$.usage.above_tier[0]'),
                            (above_tier ->> 1) - (old.payload ->> '$.usage.above_tier[1]'),
                            (above_tier ->> 2) - (old.payload ->> '$.usage.above_tier[2]'),
                            (above_tier ->> 3) - (old.payload ->> '$.usage.above_tier[3]')) END
    WHERE scope = old.scope AND session_id = old.session_id
        AND model = old.payload ->> '$.usage.model' AND bucket = unixepoch(old.ts) / {15 * 60};
    DELETE FROM usage WHERE responses <= 0;
END""",
)
# Which of a JSON list of response digests rows before a position counted.
COUNTED_BEFORE = ("SELECT response FROM usage_responses WHERE response IN "
                  "(SELECT value FROM json_each(?)) AND position < ?")
# The bucket of each of a JSON list of times (NULL: SQLite cannot read it), as the
# delete trigger works it out.
BUCKETS = f"SELECT value, unixepoch(value) / {15 * 60} FROM json_each(?)"


def count_responses(count: int) -> str:
    """Record ``count`` responses as counted, each by the position of its row, two
    parameters each (response digest, position), unless one is already. Bound
    values, not a JSON list SQLite reads itself: json_each and its two paths a
    response cost SQLite more than binding them costs Python.

    ``OR IGNORE``, not ``ON CONFLICT DO NOTHING``: with the upsert clause SQLite keeps
    a statement journal, a copy in a temporary file of every page each statement
    changes that the transaction had changed before, and digests land on every leaf
    of the table (5.6 MB written for 6,600 responses in 26 statements)."""
    return ("INSERT OR IGNORE INTO usage_responses (response, position) VALUES "
            + _values(2, count))


def add_usage(count: int) -> str:
    """Add ``count`` buckets' totals (no two of one bucket), ten parameters each:
    scope, session, model, bucket, responses, the four token kinds, above_tier
    (JSON, four counts)."""
    return "INSERT INTO usage VALUES " + _values(10, count) + _ADD_USAGE_CONFLICT


_ADD_USAGE_CONFLICT = """
ON CONFLICT (scope, session_id, model, bucket) DO UPDATE SET
    responses = responses + excluded.responses,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cache_creation_input_tokens = cache_creation_input_tokens
        + excluded.cache_creation_input_tokens,
    cache_read_input_tokens = cache_read_input_tokens + excluded.cache_read_input_tokens,
    above_tier = CASE WHEN excluded.above_tier = '[0,0,0,0]' THEN above_tier
        ELSE json_array((above_tier ->> 0) + (excluded.above_tier ->> 0),
                        (above_tier ->> 1) + (excluded.above_tier ->> 1),
                        (above_tier ->> 2) + (excluded.above_tier ->> 2),
                        (above_tier ->> 3) + (excluded.above_tier ->> 3)) END"""
# Usage per scope, session, model and bucket; parameters: from bucket, to bucket.
SELECT_USAGE = ("SELECT scope, session_id, model, bucket, input_tokens, output_tokens, "
                "cache_creation_input_tokens, cache_read_input_tokens, above_tier "
                "FROM usage WHERE bucket >= ? AND bucket < ?")

# Pages of a new store: larger pages make an append touch fewer of them (a
# quarter fewer microseconds a row than SQLite's 4 KiB; benchmarks/ingest.py).
PAGE_SIZE = 16_384


def _values(width: int, count: int) -> str:
    """The ``VALUES`` list of ``count`` rows of ``width`` parameters each."""
    row = "(" + ", ".join("?" * width) + ")"
    return ", ".join([row] * count)


INSERT = ("INSERT INTO evidence (part, scope, session_id, ts, git_remote, payload, key) "
          "VALUES (?, ?, ?, ?, ?, ?, ?)")


def insert_rows(count: int) -> str:
    """Insert ``count`` evidence rows in one statement, seven parameters each: part,
    scope, session_id, ts, git_remote, payload, key.

    One statement, not ``executemany``: SQLite does the work in one call, which
    saves the per-row round trip, most of a plain insert's cost.
    ``OR ROLLBACK``: a row the table refuses rolls the whole transaction back, so
    SQLite keeps no statement journal (a copy of every page the statement changes,
    written to a temporary file in case the statement alone must be undone).
    """
    return ("INSERT OR ROLLBACK INTO evidence "
            "(part, scope, session_id, ts, git_remote, payload, key) VALUES "
            + _values(7, count))


def count_tuples(count: int) -> str:
    """Add new rows to ``count`` tuples in one statement, four parameters each: part,
    scope, git_remote, rows. A tuple seen for the first time gets the next id, in
    the order given; a known one counts the new rows."""
    return ("INSERT INTO tuples (part, scope, git_remote, rows) VALUES " + _values(4, count)
            + " ON CONFLICT (part, scope, git_remote) DO UPDATE SET rows = rows + excluded.rows")


def insert_chunked(db: sqlite3.Connection, statement: Callable[[int], str],
                   params: list[Any], width: int, chunk_rows: int) -> int:
    """Run ``statement(n)`` (a multi-row ``VALUES`` statement of ``width``
    parameters a row) over ``params``, in order, up to ``chunk_rows`` rows a time
    (fewer when SQLite was built to take fewer parameters); returns how many rows
    the statements changed.

    Never ``executemany``: it runs the statement once a row, with Python's
    bindings and SQLite's setup each time.

    The rows short of a whole chunk go in statements of a power of two rows each
    (1,000 rows of 256 a chunk: 3 x 256 + 128 + 64 + 32 + 8), so a statement's text is one of
    a few, which the connection's statement cache keeps compiled: a batch of any
    other size would make SQLite parse a statement of thousands of parameters anew
    (a third of a microsecond a row).
    """
    limit = db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width
    full = min(chunk_rows, limit)
    before = db.total_changes
    rows, start = len(params) // width, 0
    while rows:
        count = full if rows >= full else 1 << (rows.bit_length() - 1)
        stop = start + count * width
        db.execute(statement(count), params[start:stop])
        rows, start = rows - count, stop
    return db.total_changes - before


# The rows appended after a position, per tuple, in the order tuples first appear.
# NOT INDEXED keeps it a range of the primary key: left to itself, the planner
# scans all of evidence_part to group them, a cost that grows with the store.
COUNT_NEW = ("SELECT part, scope, git_remote, COUNT(*) FROM evidence NOT INDEXED "
             "WHERE position > ? GROUP BY part, scope, git_remote ORDER BY MIN(position)")
# The keys of one partition, among a JSON list of them, that are already stored.
STORED_KEYS = ("SELECT key FROM evidence WHERE part = ? AND key IN "
               "(SELECT value FROM json_each(?))")
# The digests, among a JSON list of them, of keys a purge removed.
PURGED_DIGESTS = ("SELECT digest FROM purged_keys WHERE digest IN "
                  "(SELECT value FROM json_each(?))")
ANY_PURGED = "SELECT 1 FROM purged_keys LIMIT 1"
# Bumped by every purge and partition drop: ids cached before it may be gone.
PURGE_SEQ = "SELECT value FROM meta WHERE key = 'purge_seq'"
BUMP_PURGE_SEQ = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'purge_seq'"


def key_digest(partition: str, key: str) -> str:
    """What a purge records of a removed row's dedupe key: a one-way digest of the
    partition and the key, so neither the key nor the row stays in the file."""
    return blake2b(f"{partition}\0{key}".encode(), digest_size=16).hexdigest()


# The read of every scope a seam has not seen yet, in id order.
NEW_SCOPES = "SELECT id, directory, source_id FROM scopes WHERE id > ? ORDER BY id"
INSTANCE_ID = "SELECT value FROM meta WHERE key = 'instance_id'"
HEAD_POSITION = "SELECT seq FROM sqlite_sequence WHERE name = 'evidence'"


def connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    """A connection to the store file at ``path``.

    The writer's connection turns on WAL, so readers (``readonly=True``, which
    never creates the file) read a snapshot while a tick writes. Raises
    ``sqlite3.DatabaseError`` when the file is not a SQLite database.
    """
    if readonly:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                             isolation_level=None, check_same_thread=False)
    else:
        ensure_dir(path.parent)
        if not path.exists():
            # Created here, owner-only: SQLite would create it with the umask's
            # mode, and its -wal and -shm files copy the database file's mode.
            os.close(open_state_file(path, os.O_RDWR | os.O_CREAT))
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            # Only a file with no page yet takes it; WAL would fix the size now.
            db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError:
            db.close()
            raise
        # WAL with NORMAL keeps every transaction atomic; a power cut can lose the
        # last transactions whole (rows and cursor together), never half of one.
        db.execute("PRAGMA synchronous = NORMAL")
        # Purged evidence must not linger in free pages of the file.
        db.execute("PRAGMA secure_delete = ON")
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return db


class SeamError(HostcoreError, ValueError):
    """A read asked for something the seam does not offer (an unknown column)."""


# Column name -> SQL expression over evidence r, partitions p, scopes s.
COLUMNS: dict[str, str] = {
    "partition": "p.name",
    "source_id": "s.source_id",
    "session_id": "r.session_id",
    "ts": "r.ts",
    "directory": "s.directory",
    "git_remote": "r.git_remote",
    "payload": "r.payload",
    "key": "r.key",
}

# Column name -> SQL expression over tuples t and scopes s, for read_tuples_since.
TUPLE_COLUMNS: dict[str, str] = {
    "directory": "s.directory",
    "source_id": "s.source_id",
    "git_remote": "t.git_remote",
    "partition": "(SELECT name FROM partitions WHERE id = t.part)",
}




def select_tuples(partition: str | None, columns: Sequence[str]) -> str:
    """``SELECT t.id, *columns`` of permitted tuples; parameters: after, until, flags
    (and the partition name when given)."""
    exprs = column_exprs(columns, TUPLE_COLUMNS, "tuple reads offer")
    joins = " JOIN scopes s ON s.id = t.scope" if any(e.startswith("s.") for e in exprs) else ""
    where = "t.id > ? AND t.id <= ? AND substr(?, t.scope + 1, 1) = x'01'"
    if partition is not None:
        where += " AND t.part = (SELECT id FROM partitions WHERE name = ?)"
    select = ", ".join(["t.id", *exprs])
    return f"SELECT {select} FROM tuples t{joins} WHERE {where} ORDER BY t.id"


def column_exprs(columns: Sequence[str], offered: Mapping[str, str], offers: str) -> list[str]:
    """The SQL expressions of ``columns``, or :class:`SeamError` naming the bad ones."""
    if isinstance(columns, str):
        raise SeamError(f"columns {columns!r}: expected a sequence of column names, "
                        "not one string")
    unknown = [c for c in columns if c not in offered]
    if unknown:
        raise SeamError(f"unknown column(s) {', '.join(map(repr, unknown))}; "
                        f"{offers} {', '.join(offered)}")
    return [offered[c] for c in columns]


def select_rows(partition: str | None, columns: Sequence[str]) -> str:
    """``SELECT r.position, *columns`` of permitted rows; parameters: after, until,
    flags (and the partition name when given)."""
    exprs = column_exprs(columns, COLUMNS, "the seam offers")
    joins = ""
    if any(e.startswith("p.") for e in exprs):
        joins += " JOIN partitions p ON p.id = r.part"
    if any(e.startswith("s.") for e in exprs):
        joins += " JOIN scopes s ON s.id = r.scope"
    where = "r.position > ? AND r.position <= ? AND substr(?, r.scope + 1, 1) = x'01'"
    if partition is not None:
        where += " AND r.part = (SELECT id FROM partitions WHERE name = ?)"
    select = ", ".join(["r.position", *exprs])
    return f"SELECT {select} FROM evidence r{joins} WHERE {where} ORDER BY r.position"

