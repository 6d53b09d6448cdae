"""The evidence store: one SQLite file (WAL) under the state root.

Evidence rows live in named partitions. Every row gets a store-wide position
that only ever grows: positions come from ``INTEGER PRIMARY KEY AUTOINCREMENT``,
so a purged row's position is never handed out again. Each partition carries a
version ``epoch:rowCount``: appending grows ``rowCount``; a purge recomputes
``rowCount`` from the live count and moves the partition to a fresh epoch, so a
purge followed by appends back to the old count is still told apart from growth.

Rows leave the store only through :class:`hostcore.evidence.seam.ExportSeam`, which
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
from pathlib import Path
from typing import Any

import msgspec

from hostcore.errors import HostcoreError, RecordError
from hostcore.evidence import schema
from hostcore.evidence.paths import within
from hostcore.evidence.rows import EvidenceRow, PartitionVersion, SourceBatch
from hostcore.timestamps import canonical, format_utc, parse

# EvidenceRow, PartitionVersion and SourceBatch live in hostcore.evidence.rows;
# they are importable from here too, as in 0.1.
__all__ = ["STORE_FILE_NAME", "EvidenceRow", "PartitionVersion", "SourceBatch", "Store",
           "StoreError"]

STORE_FILE_NAME = "store.sqlite3"

_payload_encoder = msgspec.json.Encoder()


class StoreError(HostcoreError):
    """The store file cannot be used (newer schema, not a store, bad selector)."""


class Store:
    """The embedded evidence store. Open one per host (``host.store``).

    :param path: the SQLite file (created with its schema when missing).
    :param read_only: open for reading only, creating nothing: a missing file
        reads as an empty store (``instance_id`` ``""``), and every write raises
        :class:`StoreError`. Readers never wait for a writer (WAL).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        # One connection shared by the threads of an embedding process: every use
        # of it holds this lock, so transactions never interleave.
        self._lock = threading.RLock()
        self._scope_ids: dict[tuple[str, str], int] = {}
        self._part_ids: dict[str, int] = {}
        try:
            if read_only:
                self._db, self.instance_id = self._open_read_only()
            else:
                self._db = schema.connect(self.path, readonly=False)
                self.instance_id = self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not an evidence store "
                             f"({_sqlite_reason(exc)})") from None

    # -- setup ---------------------------------------------------------------

    def _open_read_only(self) -> tuple[sqlite3.Connection, str]:
        if not self.path.exists():
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            for statement in schema.DDL.split(";"):
                if statement.strip():
                    db.execute(statement)
            return db, ""
        db = schema.connect(self.path, readonly=True)
        values = dict(db.execute("SELECT key, value FROM meta"))
        _check_version(self.path, values)
        return db, str(values.get("instance_id", ""))

    def _init_schema(self) -> str:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in schema.DDL.split(";"):
                if statement.strip():
                    db.execute(statement)
            values = dict(db.execute("SELECT key, value FROM meta"))
            _check_version(self.path, values)
            if "tuples" not in values:
                # A store written before the tuple summary existed: derive it once.
                db.execute("INSERT INTO tuples (part, scope, git_remote, rows) SELECT part, "
                           "scope, git_remote, COUNT(*) FROM evidence "
                           "GROUP BY part, scope, git_remote ORDER BY MIN(position)")
                db.execute("INSERT INTO meta (key, value) VALUES ('tuples', '1')")
            instance = values.get("instance_id") or uuid.uuid4().hex
            db.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                           [("instance_id", instance), ("schema", str(schema.VERSION)),
                            ("epoch_seq", "0")])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return str(instance)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all."""
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
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
                values = (part, scope, row.session_id, canonical(row.ts), row.git_remote,
                          _payload_encoder.encode(row.payload).decode(), row.key)
                # A keyed row is checked before inserting: a refused INSERT would still
                # use up a position.
                if row.key is None:
                    db.execute(schema.INSERT, values)
                elif not db.execute(schema.INSERT_KEYED, (*values, part, row.key)).rowcount:
                    continue
                inserted[part] = inserted.get(part, 0) + 1
                found = (part, scope, row.git_remote)
                tuples[found] = tuples.get(found, 0) + 1
            db.executemany("UPDATE partitions SET row_count = row_count + ? WHERE id = ?",
                           [(count, part) for part, count in inserted.items()])
            db.executemany(schema.COUNT_TUPLE, [(*found, n) for found, n in tuples.items()])
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



def _check_version(path: Path, values: dict[str, str]) -> None:
    found = int(values.get("schema", schema.VERSION))
    if found > schema.VERSION:
        raise StoreError(f"{path}: store schema {found} is newer than this hostcore "
                         f"understands ({schema.VERSION}); upgrade hostcore")


def _sqlite_reason(exc: sqlite3.DatabaseError) -> str:
    """SQLite's own words for why a file is unusable (they name no path)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


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
        cutoff = parse(before)
        if cutoff is None:
            raise StoreError(f"purge before {before!r}: not an ISO-8601 timestamp")
        # Canonical timestamps compare as text; an unparseable ts is never matched.
        clauses.append("ts < ? AND ts GLOB '[0-9][0-9][0-9][0-9]-*Z'")
        params.append(format_utc(cutoff, "micro"))
    if not clauses:
        raise StoreError("purge needs at least one selector (source, session, directory, "
                         "before)")
    return " AND ".join(clauses), params
