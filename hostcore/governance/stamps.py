"""Stamps and verdicts, kept under the root: ``<root>/governance/stamps.sqlite3``.

A *stamp* is the producer's basis: the governance in force at a target's
governance point when it was written (and the session and work item, when
known). A *verdict* is a reviewer's: ``approved`` vouches for the target under the
governance in force when it was given; ``rejected`` vouches for nothing. Each
target keeps its latest stamp and its latest verdict; a counter orders them, so
which came last never depends on two clocks agreeing.

Only the gate reads or writes these tables. Paths are kept (the gate must find
its targets again) but never leave this file: logs and telemetry carry counts.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from hostcore.files import ensure_dir
from hostcore.governance.inputs import Governance
from hostcore.plugin import fault_counts

FILE = Path("governance") / "stamps.sqlite3"
# How long a writer waits for another process's transaction (seconds): stamps come
# from agent hooks, many at once.
BUSY_SECONDS = 10.0
STAMP = "stamp"
VERDICT = "verdict"
APPROVED = "approved"
REJECTED = "rejected"

# Targets stamped under one governance share one row of `governances` (its JSON):
# 10,000 stamps of one tree hold a few distinct ones, so a check decodes a few.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS governances (id INTEGER PRIMARY KEY, body BLOB NOT NULL "
    "UNIQUE)",
    "CREATE TABLE IF NOT EXISTS bases (path TEXT NOT NULL, kind TEXT NOT NULL, "
    "repo TEXT NOT NULL, seq INTEGER NOT NULL, at TEXT NOT NULL, session TEXT, item TEXT, "
    "verdict TEXT, governance INTEGER NOT NULL REFERENCES governances (id), "
    "PRIMARY KEY (path, kind))",
    "CREATE INDEX IF NOT EXISTS bases_repo ON bases (repo)",
    "CREATE INDEX IF NOT EXISTS bases_seq ON bases (seq)",
    "CREATE INDEX IF NOT EXISTS bases_session ON bases (session) WHERE session IS NOT NULL",
    # The gate's fault counts, by kind (hostcore.governance.faults): no path, no name.
    fault_counts.SCHEMA,
)
_COLUMNS = "path, kind, repo, seq, at, session, item, verdict, governance"
# Parameters per statement: SQLite builds before 3.32 allow no more than 999.
_PARAMETERS = 900
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Governance).decode


class Basis(msgspec.Struct, frozen=True, kw_only=True):
    """One stamp or verdict of one target."""

    path: str
    kind: str  # STAMP or VERDICT
    repo: str
    seq: int
    at: str
    governance: Governance
    session: str | None = None
    item: str | None = None
    verdict: str | None = None  # APPROVED or REJECTED, on a verdict


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """What is kept for one target: its latest stamp and latest verdict."""

    path: str
    stamp: Basis | None = None
    verdict: Basis | None = None

    def basis(self) -> Basis | None:
        """What the target is judged by: an approval newer than the stamp, else the
        stamp (a rejection vouches for nothing); ``None`` when neither vouches."""
        if (self.verdict is not None and self.verdict.verdict == APPROVED
                and (self.stamp is None or self.verdict.seq > self.stamp.seq)):
            return self.verdict
        return self.stamp


class New(msgspec.Struct, frozen=True, kw_only=True):
    """A stamp or verdict to record (the counter and time are the store's)."""

    path: str
    repo: str
    governance: Governance
    session: str | None = None
    item: str | None = None
    verdict: str | None = None


class Stamps:
    """The stamp store of one root. Opened per command; ``read_only`` creates nothing."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.path = root / FILE
        self._read_only = read_only
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if self._read_only:
            if not self.path.exists():
                return None  # nothing stamped yet
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                 timeout=BUSY_SECONDS, isolation_level=None)
        else:
            ensure_dir(self.path.parent)
            db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                db.execute(statement)
        self._db = db
        return db

    def connection(self) -> sqlite3.Connection:
        """The writable store's connection, its tables made (for the fault counts)."""
        db = self._connect()
        assert db is not None, "a read-only stamp store has no writable connection"
        return db

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees one state of the store, however many statements it
        takes (a check of thousands of targets reads them in chunks, then their
        governances): a stamp or verdict another process commits meanwhile is seen
        whole or not at all, and a governance a read row names is still there."""
        db = self._connect()
        if db is None:
            yield
            return
        db.execute("BEGIN")  # deferred: the snapshot is taken at the first read
        try:
            yield
        finally:
            db.execute("COMMIT")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def record(self, kind: str, new: Sequence[New], at: str) -> None:
        """Record ``new`` as stamps or verdicts (``kind``), each replacing the target's
        last of that kind, in one transaction."""
        db = self._connect()
        assert db is not None, "a read-only stamp store records nothing"
        with db:
            db.execute("BEGIN IMMEDIATE")
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM bases").fetchone()
            ids: dict[bytes, int] = {}
            rows = []
            for i, n in enumerate(new, start=1):
                body = _encode(n.governance)
                gid = ids.get(body)
                if gid is None:
                    gid = ids[body] = _governance_id(db, body)
                rows.append((n.path, kind, n.repo, seq + i, at, n.session, n.item, n.verdict,
                             gid))
            db.executemany(
                f"INSERT OR REPLACE INTO bases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows)

    def forget(self, paths: Iterable[str]) -> int:
        """Drop every stamp and verdict of ``paths``; how many targets had any."""
        db = self._connect()
        assert db is not None, "a read-only stamp store forgets nothing"
        wanted = sorted(set(paths))
        with db:
            db.execute("BEGIN IMMEDIATE")
            found = sum(db.execute("SELECT COUNT(DISTINCT path) FROM bases WHERE path = ?",
                                   (p,)).fetchone()[0] for p in wanted)
            db.executemany("DELETE FROM bases WHERE path = ?", [(p,) for p in wanted])
            # The governances no basis names any more (a restamp leaves its old one).
            db.execute("DELETE FROM governances WHERE id NOT IN "
                       "(SELECT DISTINCT governance FROM bases)")
        return int(found)

    def entries(self, paths: Iterable[str]) -> dict[str, Entry]:
        """The entry of each of ``paths`` that has a stamp or verdict."""
        db = self._connect()
        if db is None:
            return {}
        rows: list[tuple[object, ...]] = []
        for chunk in _chunks(sorted(set(paths))):
            rows.extend(db.execute(f"SELECT {_COLUMNS} FROM bases WHERE path IN "
                                   f"({', '.join('?' * len(chunk))})", chunk))
        return _entries(db, rows)

    def in_repository(self, repo: str) -> dict[str, Entry]:
        """Every entry of the repository rooted at ``repo``."""
        db = self._connect()
        if db is None:
            return {}
        return _entries(db, db.execute(f"SELECT {_COLUMNS} FROM bases WHERE repo = ?",
                                       (repo,)).fetchall())

    def under(self, folder: str) -> dict[str, Entry]:
        """Every entry of a target anywhere below ``folder`` (absolute, no trailing
        ``/``): a range of the primary key, since ``0`` follows ``/``."""
        db = self._connect()
        if db is None:
            return {}
        return _entries(db, db.execute(f"SELECT {_COLUMNS} FROM bases WHERE path > ? "
                                       "AND path < ?", (f"{folder}/", f"{folder}0")).fetchall())

    def stamped_by(self, session: str) -> dict[str, Entry]:
        """Every entry whose latest stamp was made by ``session``."""
        db = self._connect()
        if db is None:
            return {}
        return _entries(db, db.execute(
            f"SELECT {_COLUMNS} FROM bases WHERE path IN (SELECT path FROM bases "
            "WHERE session = ? AND kind = ?)", (session, STAMP)).fetchall())


def _governance_id(db: sqlite3.Connection, body: bytes) -> int:
    db.execute("INSERT OR IGNORE INTO governances (body) VALUES (?)", (body,))
    (gid,) = db.execute("SELECT id FROM governances WHERE body = ?", (body,)).fetchone()
    return int(gid)


def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    """``values`` in slices that fit one statement's parameters (SQLite's floor: 999)."""
    for start in range(0, len(values), _PARAMETERS):
        yield values[start:start + _PARAMETERS]


def _entries(db: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> dict[str, Entry]:
    stamps: dict[str, Basis] = {}
    verdicts: dict[str, Basis] = {}
    # The few governances the rows name, in one read per chunk, each decoded once.
    decoded: dict[int, Governance] = {}
    for chunk in _chunks(sorted({row[-1] for row in rows})):
        decoded.update((gid, _decode(body)) for gid, body in db.execute(
            f"SELECT id, body FROM governances WHERE id IN ({', '.join('?' * len(chunk))})",
            chunk))
    for path, kind, repo, seq, at, session, item, verdict, gid in rows:
        governance = decoded[gid]
        basis = Basis(path=path, kind=kind, repo=repo, seq=seq, at=at, governance=governance,
                      session=session, item=item, verdict=verdict)
        (stamps if kind == STAMP else verdicts)[path] = basis
    return {path: Entry(path=path, stamp=stamps.get(path), verdict=verdicts.get(path))
            for path in sorted(stamps.keys() | verdicts.keys())}
