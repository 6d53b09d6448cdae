"""The export seam: the one way evidence rows leave the store.

``read_rows_since(partition, cursor, columns)`` streams the rows after
``cursor`` (a position), in position order, as ``(position, *columns)`` tuples,
keeping back every row the live withholding policy withholds.

How a read works (and why it is fast): rows do not carry their directory and
source as text but the id of their *scope*, a distinct (directory, source) pair.
Each read opens its own read-only connection and one read transaction; inside
it, it reads the scopes, asks the policy once per scope (cached per pair, see
:mod:`hostcore.policy`) and hands SQLite one byte per scope id saying whether
the scope is permitted, so SQLite skips withheld rows itself at the cost of one
blob lookup per row. Rows are fetched in chunks, so memory does not grow with the
number of rows read. Because scopes and rows are read in the same transaction,
every row the read can see belongs to a scope the policy evaluated.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from hostcore.errors import HostcoreError

if TYPE_CHECKING:
    from hostcore.policy import Policy
    from hostcore.store import Store

# Rows fetched from SQLite per round trip; bounds the memory of a read.
FETCH_ROWS = 1024

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
}


class SeamError(HostcoreError, ValueError):
    """A read asked for something the seam does not offer (an unknown column)."""


class ExportSeam:
    """Reads evidence under the live withholding policy (``host.seam``).

    :param fetch_rows: rows per fetch (memory bound of a read; tests shrink it).
    """

    def __init__(self, store: Store, policy: Policy, *, fetch_rows: int = FETCH_ROWS) -> None:
        self._store = store
        self._policy = policy
        self._fetch_rows = fetch_rows
        # Scopes are only ever added (ids are never reused), so each read fetches
        # just the new ones. Keyed by the store's instance id in case the file is
        # replaced underneath a long-lived host.
        self._scopes: list[tuple[int, str, str]] = []
        self._scopes_of: str | None = None

    def export_policy_fingerprint(self) -> str:
        """The live policy's fingerprint; two small reads, no row reads."""
        return self._policy.fingerprint()

    async def read_rows_since(self, partition: str | None, cursor: int,
                              columns: Sequence[str]) -> AsyncIterator[tuple]:
        """Yield ``(position, *columns)`` for each permitted row after ``cursor``,
        in position order; ``partition=None`` reads every partition.

        The policy is evaluated when iteration starts. Between chunks the event
        loop gets a turn, so a long read does not starve other tasks.
        """
        chunks = self._chunks(partition, cursor, columns)
        try:
            for chunk in chunks:
                for row in chunk:
                    yield row
                await asyncio.sleep(0)
        finally:
            chunks.close()

    def read_rows_since_sync(self, partition: str | None, cursor: int,
                             columns: Sequence[str]) -> Iterator[tuple]:
        """The synchronous twin of :meth:`read_rows_since` (same rows, same order)."""
        chunks = self._chunks(partition, cursor, columns)
        return (row for chunk in chunks for row in chunk)

    def read_tuples_since_sync(self, partition: str | None, cursor: int,
                               columns: Sequence[str]) -> Iterator[tuple]:
        """Yield ``(tuple_id, *columns)`` for each distinct (directory, source,
        git_remote) of ``partition``'s rows whose id is after ``cursor``, in id
        order, keeping back every tuple whose rows the policy withholds (the same
        per-scope verdicts :meth:`read_rows_since` applies). Columns: ``directory``,
        ``source_id``, ``git_remote``.

        The store keeps these tuples, with their row counts, as rows are appended
        and purged, so the work is proportional to distinct tuples, not rows. A
        tuple's id is assigned when it first appears: rows appended later under a
        known tuple do not bring it back. A consumer that must see every row's
        value notes :meth:`Store.head_position` before it starts and reads the
        rows after that position afterwards.
        """
        sql = _select_tuples(partition, columns)
        _check_cursor(cursor)
        chunks = self._run(sql, partition, cursor)
        return (row for chunk in chunks for row in chunk)

    def _chunks(self, partition: str | None, cursor: int,
                columns: Sequence[str]) -> Iterator[list[tuple]]:
        sql = _select(partition, columns)
        _check_cursor(cursor)
        return self._run(sql, partition, cursor)

    def _run(self, sql: str, partition: str | None, cursor: int) -> Iterator[list[tuple]]:
        db = self._store._open_reader()
        try:
            # One read transaction: the scopes evaluated and the rows read are the
            # same snapshot, whatever writers do meanwhile.
            db.execute("BEGIN")
            params: list[object] = [cursor, _permitted_flags(self._known_scopes(db),
                                                             self._policy)]
            if partition is not None:
                params.append(partition)
            rows = db.execute(sql, params)
            fetch = self._fetch_rows
            while chunk := rows.fetchmany(fetch):
                yield chunk
        finally:
            db.close()

    def _known_scopes(self, db: sqlite3.Connection) -> list[tuple[int, str, str]]:
        instance = db.execute("SELECT value FROM meta WHERE key = 'instance_id'").fetchone()
        if instance is None or instance[0] != self._scopes_of:
            self._scopes = []
            self._scopes_of = None if instance is None else instance[0]
        newest = self._scopes[-1][0] if self._scopes else 0
        self._scopes += db.execute("SELECT id, directory, source_id FROM scopes WHERE id > ? "
                                   "ORDER BY id", (newest,))
        return self._scopes


def _permitted_flags(scopes: list[tuple[int, str, str]], policy: Policy) -> bytes:
    """One byte per scope id (``scopes`` in id order): 1 when the policy permits the scope's rows.

    SQLite indexes a blob by bytes in O(1), so ``substr(flags, scope + 1, 1)``
    costs next to nothing per row. A scope id past the end reads as withheld.
    """
    flags = bytearray((scopes[-1][0] if scopes else 0) + 1)
    for scope, _, _ in scopes:
        flags[scope] = 1
    for scope in policy.withheld(scopes):
        flags[scope] = 0
    return bytes(flags)


def _select_tuples(partition: str | None, columns: Sequence[str]) -> str:
    exprs = _column_exprs(columns, TUPLE_COLUMNS, "tuple reads offer")
    joins = " JOIN scopes s ON s.id = t.scope" if any(e.startswith("s.") for e in exprs) else ""
    where = "t.id > ? AND substr(?, t.scope + 1, 1) = x'01'"
    if partition is not None:
        where += " AND t.part = (SELECT id FROM partitions WHERE name = ?)"
    select = ", ".join(["t.id", *exprs])
    return f"SELECT {select} FROM tuples t{joins} WHERE {where} ORDER BY t.id"


def _column_exprs(columns: Sequence[str], offered: Mapping[str, str], offers: str) -> list[str]:
    """The SQL expressions of ``columns``, or :class:`SeamError` naming the bad ones."""
    if isinstance(columns, str):
        raise SeamError(f"columns {columns!r}: expected a sequence of column names, "
                        "not one string")
    unknown = [c for c in columns if c not in offered]
    if unknown:
        raise SeamError(f"unknown column(s) {', '.join(map(repr, unknown))}; "
                        f"{offers} {', '.join(offered)}")
    return [offered[c] for c in columns]


def _check_cursor(cursor: int) -> None:
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise SeamError(f"cursor {cursor!r}: expected a position (an int >= 0)")


def _select(partition: str | None, columns: Sequence[str]) -> str:
    exprs = _column_exprs(columns, COLUMNS, "the seam offers")
    joins = ""
    if any(e.startswith("p.") for e in exprs):
        joins += " JOIN partitions p ON p.id = r.part"
    if any(e.startswith("s.") for e in exprs):
        joins += " JOIN scopes s ON s.id = r.scope"
    where = "r.position > ? AND substr(?, r.scope + 1, 1) = x'01'"
    if partition is not None:
        where += " AND r.part = (SELECT id FROM partitions WHERE name = ?)"
    select = ", ".join(["r.position", *exprs])
    return f"SELECT {select} FROM evidence r{joins} WHERE {where} ORDER BY r.position"

