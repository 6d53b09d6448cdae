"""The evidence store: one SQLite file (WAL) under the state root.

Evidence rows live in named partitions. Every row gets a store-wide position
that only ever grows: positions come from ``INTEGER PRIMARY KEY AUTOINCREMENT``,
so a purged row's position is never handed out again. Each partition carries a
version ``epoch:rowCount``: appending grows ``rowCount``; a purge recomputes
``rowCount`` from the live count and moves the partition to a fresh epoch, so a
purge followed by appends back to the old count is still told apart from growth.

Rows leave the store only through :class:`hostcore.seam.ExportSeam`, which
applies the live withholding policy. This module deliberately has no public
method that reads rows back.

Layout (see ``docs/evidence.md``)::

    meta(key, value)                       instance id, schema, epoch sequence
    partitions(id, name, epoch, row_count)
    scopes(id, directory, source_id)       distinct (directory, source) pairs
    evidence(position, part, scope, session_id, ts, git_remote, payload, key)
    tuples(id, part, scope, git_remote, rows)   distinct (partition, scope, remote), counted
    source_cursors(source, cursor)
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from hostcore.errors import HostcoreError, RecordError
from hostcore.paths import within

STORE_FILE_NAME = "store.sqlite3"
SCHEMA_VERSION = 1
# How long a writer waits for another process's transaction (milliseconds).
BUSY_TIMEOUT_MS = 10_000

_SCHEMA = """
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
"""

_INSERT = ("INSERT INTO evidence (part, scope, session_id, ts, git_remote, payload, key) "
           "VALUES (?, ?, ?, ?, ?, ?, ?)")
# A tuple seen for the first time gets the next id; a known one counts the new rows.
_COUNT_TUPLE = ("INSERT INTO tuples (part, scope, git_remote, rows) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (part, scope, git_remote) DO UPDATE SET rows = rows + excluded.rows")
_INSERT_KEYED = ("INSERT INTO evidence (part, scope, session_id, ts, git_remote, payload, key) "
                 "SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
                 "(SELECT 1 FROM evidence WHERE part = ? AND key = ?)")

_payload_encoder = msgspec.json.Encoder()


class StoreError(HostcoreError):
    """The store file cannot be used (newer schema, not a store, bad selector)."""


class EvidenceRow(msgspec.Struct, kw_only=True):
    """One piece of evidence as a source hands it to the store.

    ``ts`` is ISO-8601; a parseable value is stored in the canonical UTC form
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` so time-range purges compare correctly, an
    unparseable one is kept as given (and is never matched by ``before``).
    ``key``, when set, is unique within the partition: appending a row whose key
    is already there adds nothing, which makes re-reading an input idempotent.
    """

    partition: str
    source_id: str
    session_id: str = ""
    ts: str = ""
    directory: str = ""
    git_remote: str = ""
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    key: str | None = None


class SourceBatch(msgspec.Struct):
    """What ``Source.read(cursor)`` returns: new rows and the cursor to persist.

    ``more`` tells the ingest worker the source stopped at a budget and has more
    ready now (the tick loop then comes back at the backlog cadence).
    """

    rows: list[EvidenceRow]
    cursor: str | None
    more: bool = False


class PartitionVersion(msgspec.Struct, frozen=True):
    """A partition's version. Compare versions only through :meth:`grew_from`."""

    epoch: int
    row_count: int

    def __str__(self) -> str:
        return f"{self.epoch}:{self.row_count}"

    def grew_from(self, older: PartitionVersion) -> bool:
        """True when this version is ``older`` plus appends only (no purge between)."""
        return self.epoch == older.epoch and self.row_count >= older.row_count

    @classmethod
    def parse(cls, text: str) -> PartitionVersion:
        """Read ``"epoch:rowCount"`` back (as persisted by consumers)."""
        epoch, sep, count = text.partition(":")
        if not sep or not epoch.isdigit() or not count.isdigit():
            raise RecordError(f"partition version {text!r}: expected 'epoch:rowCount'")
        return cls(int(epoch), int(count))


def parse_ts(value: str) -> datetime | None:
    """An aware datetime for an ISO-8601 ``value`` (no offset means UTC), else ``None``."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def format_ts(moment: datetime) -> str:
    """The store's canonical text for a timestamp: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_ts(value: str) -> str:
    """``value`` in the canonical UTC form, or unchanged when unparseable."""
    moment = parse_ts(value) if value else None
    return value if moment is None else format_ts(moment)


class Store:
    """The embedded evidence store. Open one per host (``host.store``).

    :param path: the SQLite file (created with its schema when missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = _connect(self.path, readonly=False)
        # One connection shared by the threads of an embedding process: every use
        # of it holds this lock, so transactions never interleave.
        self._lock = threading.RLock()
        self._scope_ids: dict[tuple[str, str], int] = {}
        self._part_ids: dict[str, int] = {}
        self.instance_id = self._init_schema()

    # -- setup ---------------------------------------------------------------

    def _init_schema(self) -> str:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            values = dict(db.execute("SELECT key, value FROM meta"))
            schema = int(values.get("schema", SCHEMA_VERSION))
            if schema > SCHEMA_VERSION:
                raise StoreError(f"{self.path}: store schema {schema} is newer than this "
                                 f"hostcore understands ({SCHEMA_VERSION}); upgrade hostcore")
            if "tuples" not in values:
                # A store written before the tuple summary existed: derive it once.
                db.execute("INSERT INTO tuples (part, scope, git_remote, rows) SELECT part, "
                           "scope, git_remote, COUNT(*) FROM evidence "
                           "GROUP BY part, scope, git_remote ORDER BY MIN(position)")
                db.execute("INSERT INTO meta (key, value) VALUES ('tuples', '1')")
            instance = values.get("instance_id") or uuid.uuid4().hex
            db.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                           [("instance_id", instance), ("schema", str(SCHEMA_VERSION)),
                            ("epoch_seq", "0")])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return instance

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # -- writing -------------------------------------------------------------

    def append(self, rows: Iterable[EvidenceRow], *, source: str | None = None,
               cursor: str | None = None) -> int:
        """Insert ``rows`` and, when ``source`` is given, persist its ``cursor``, in one
        transaction. A row whose ``(partition, key)`` is already stored is skipped.
        Returns how many rows were inserted."""
        inserted: dict[int, int] = {}
        tuples: dict[tuple[int, int, str], int] = {}
        with self._transaction() as db:
            for index, row in enumerate(rows):
                _check_row(index, row)
                part = self._partition_id(db, row.partition)
                scope = self._scope_id(db, row.directory, row.source_id)
                values = (part, scope, row.session_id, canonical_ts(row.ts), row.git_remote,
                          _payload_encoder.encode(row.payload).decode(), row.key)
                # A keyed row is checked before inserting: a refused INSERT would still
                # use up a position.
                if row.key is None:
                    db.execute(_INSERT, values)
                elif not db.execute(_INSERT_KEYED, (*values, part, row.key)).rowcount:
                    continue
                inserted[part] = inserted.get(part, 0) + 1
                found = (part, scope, row.git_remote)
                tuples[found] = tuples.get(found, 0) + 1
            db.executemany("UPDATE partitions SET row_count = row_count + ? WHERE id = ?",
                           [(count, part) for part, count in inserted.items()])
            db.executemany(_COUNT_TUPLE, [(*found, n) for found, n in tuples.items()])
            if source is not None:
                db.execute("INSERT INTO source_cursors (source, cursor) VALUES (?, ?) "
                           "ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor",
                           (source, cursor))
        return sum(inserted.values())

    def _partition_id(self, db: sqlite3.Connection, name: str) -> int:
        part = self._part_ids.get(name)
        if part is None:
            found = db.execute("SELECT id FROM partitions WHERE name = ?", (name,)).fetchone()
            if found is None:
                found = db.execute(
                    "INSERT INTO partitions (name, epoch, row_count) VALUES (?, ?, 0) "
                    "RETURNING id", (name, _next_epoch(db))).fetchone()
            part = self._part_ids[name] = found[0]
        return part

    def _scope_id(self, db: sqlite3.Connection, directory: str, source_id: str) -> int:
        key = (directory, source_id)
        scope = self._scope_ids.get(key)
        if scope is None:
            db.execute("INSERT OR IGNORE INTO scopes (directory, source_id) VALUES (?, ?)", key)
            scope = db.execute("SELECT id FROM scopes WHERE directory = ? AND source_id = ?",
                               key).fetchone()[0]
            self._scope_ids[key] = scope
        return scope

    def purge(self, *, source_id: str | None = None, session_id: str | None = None,
              directory: str | None = None, before: str | None = None,
              dry_run: bool = False) -> dict[str, int]:
        """Delete every row matching all the given selectors, in one transaction.

        ``directory`` matches that directory and everything below it (on path
        boundaries, ``/`` or ``\\``); ``before`` matches rows whose canonical
        timestamp is earlier. Every partition that lost rows gets its live row count
        and a fresh epoch. Returns rows deleted per partition (only those that lost
        any). At least one selector is required. ``dry_run`` only counts.
        """
        with self._transaction() as db:
            where, params = _purge_filter(db, source_id, session_id, directory, before)
            deleted = dict(db.execute(
                f"SELECT part, COUNT(*) FROM evidence WHERE {where} GROUP BY part", params))
            if deleted and not dry_run:
                scopes = [r[0] for r in db.execute(
                    f"SELECT DISTINCT scope FROM evidence WHERE {where}", params)]
                gone = db.execute(f"SELECT COUNT(*), part, scope, git_remote FROM evidence "
                                  f"WHERE {where} GROUP BY part, scope, git_remote",
                                  params).fetchall()
                db.execute(f"DELETE FROM evidence WHERE {where}", params)
                db.executemany("UPDATE tuples SET rows = rows - ? WHERE part = ? AND scope = ? "
                               "AND git_remote = ?", gone)
                db.execute("DELETE FROM tuples WHERE rows <= 0")
                for part in deleted:
                    db.execute("UPDATE partitions SET epoch = ?, row_count = (SELECT COUNT(*) "
                               "FROM evidence WHERE part = ?) WHERE id = ?",
                               (_next_epoch(db), part, part))
                # A purged directory's name should not outlive its rows.
                db.executemany("DELETE FROM scopes WHERE id = ? AND NOT EXISTS "
                               "(SELECT 1 FROM evidence WHERE scope = ?)",
                               [(s, s) for s in scopes])
            names = dict(db.execute("SELECT id, name FROM partitions"))
        self._scope_ids.clear()
        return {names[part]: count for part, count in deleted.items()}

    def drop_partition(self, name: str) -> None:
        """Delete a partition and all its rows. A later append under the same name
        starts a new partition with an epoch never used before."""
        with self._transaction() as db:
            found = db.execute("SELECT id FROM partitions WHERE name = ?", (name,)).fetchone()
            if found is None:
                return
            db.execute("DELETE FROM evidence WHERE part = ?", found)
            db.execute("DELETE FROM tuples WHERE part = ?", found)
            db.execute("DELETE FROM partitions WHERE id = ?", found)
            db.execute("DELETE FROM scopes WHERE NOT EXISTS "
                       "(SELECT 1 FROM evidence WHERE scope = scopes.id)")
        self._part_ids.pop(name, None)
        self._scope_ids.clear()

    # -- cheap reads (no row is read) ----------------------------------------

    def partitions(self) -> dict[str, PartitionVersion]:
        """Every partition and its version, read from the partitions table only."""
        return {name: PartitionVersion(epoch, count) for name, epoch, count in self._query(
            "SELECT name, epoch, row_count FROM partitions ORDER BY name")}

    def source_cursor(self, source: str) -> str | None:
        """The cursor last persisted for ``source`` (``None`` when never ingested)."""
        found = self._query("SELECT cursor FROM source_cursors WHERE source = ?", (source,))
        return found[0][0] if found else None

    def head_position(self) -> int:
        """The highest position ever assigned (0 when no row was ever appended)."""
        found = self._query("SELECT seq FROM sqlite_sequence WHERE name = 'evidence'")
        return int(found[0][0]) if found else 0

    def stats(self) -> dict[str, int]:
        """Counts for ``hostcore status``: partitions, scopes, rows, head position."""
        parts = self.partitions()
        scopes = self._query("SELECT COUNT(*) FROM scopes")[0][0]
        return {"partitions": len(parts), "rows": sum(v.row_count for v in parts.values()),
                "scopes": scopes, "head_position": self.head_position()}

    def _open_reader(self) -> sqlite3.Connection:
        """A fresh read-only connection for one export read (see the seam)."""
        return _connect(self.path, readonly=True)


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    if readonly:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                             isolation_level=None, check_same_thread=False)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{path}: not an evidence store ({exc})") from None
        # WAL with NORMAL keeps every transaction atomic; a power cut can lose the
        # last transactions whole (rows and cursor together), never half of one.
        db.execute("PRAGMA synchronous = NORMAL")
        # Purged evidence must not linger in free pages of the file.
        db.execute("PRAGMA secure_delete = ON")
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return db


def _next_epoch(db: sqlite3.Connection) -> int:
    return db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                      "WHERE key = 'epoch_seq' RETURNING CAST(value AS INTEGER)").fetchone()[0]


def _check_row(index: int, row: Any) -> None:
    if not isinstance(row, EvidenceRow):
        raise RecordError(f"evidence row {index}: expected EvidenceRow, got {type(row).__name__}")
    if not row.partition:
        raise RecordError(f"evidence row {index}: partition must not be empty")
    if not row.source_id:
        raise RecordError(f"evidence row {index}: source_id must not be empty")


def _purge_filter(db: sqlite3.Connection, source_id: str | None, session_id: str | None,
                  directory: str | None, before: str | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if source_id is not None or directory is not None:
        # Scopes are few: match them in Python with the policy's path rules.
        scopes = [scope for scope, scope_dir, scope_source in db.execute(
                      "SELECT id, directory, source_id FROM scopes")
                  if (source_id is None or scope_source == source_id)
                  and (directory is None or within(scope_dir, directory))]
        clauses.append("scope IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(scopes))
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(session_id)
    if before is not None:
        cutoff = parse_ts(before)
        if cutoff is None:
            raise StoreError(f"purge before {before!r}: not an ISO-8601 timestamp")
        # Canonical timestamps compare as text; an unparseable ts is never matched.
        clauses.append("ts < ? AND ts GLOB '[0-9][0-9][0-9][0-9]-*Z'")
        params.append(format_ts(cutoff))
    if not clauses:
        raise StoreError("purge needs at least one selector (source, session, directory, "
                         "before)")
    return " AND ".join(clauses), params
