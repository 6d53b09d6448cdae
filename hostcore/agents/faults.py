"""The faults of ``hostcore hook`` runs, kept under the root: ``<root>/agents/hooks.sqlite3``.

A hook never fails its agent for a fault of its own (bad input, a plugin that
raised, a store it could not write): it exits 0 and notes the fault here, by
kind, so ``hostcore status`` shows it and the next tick's ``agent-hooks`` step
fails naming the kinds (``run --once`` exits 1). Many hooks run at once (one per
tool call, and Codex starts the hooks of one event together): each note is one
short SQLite transaction. Only kinds, counts, times, the agent and the event
name are kept, never a path, a session id or a message's text; the last
:data:`LOG_ROWS` faults are kept as a log.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hostcore.files import ensure_dir
from hostcore.plugin import fault_counts
from hostcore.plugin.fault_counts import Fault
from hostcore.timestamps import format_utc, utc_now

FILE = Path("agents") / "hooks.sqlite3"
# How many faults the log keeps, newest first (the counts keep them all).
LOG_ROWS = 200
# How long a note waits for another hook's (seconds): far less than any hook timeout.
BUSY_SECONDS = 2.0

_SCHEMA = (
    fault_counts.SCHEMA,
    "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, "
    "kind TEXT NOT NULL, agent TEXT NOT NULL, event TEXT NOT NULL)",
)


__all__ = ["Fault", "faults", "log", "note", "take_unreported"]


def _connect(root: Path, *, create: bool) -> sqlite3.Connection | None:
    path = root / FILE
    if not create and not path.exists():
        return None
    if create:
        ensure_dir(path.parent)
    db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    for statement in _SCHEMA:
        db.execute(statement)
    return db


def note(root: Path, kind: str, *, agent: str, event: str) -> None:
    """Count one fault of ``kind`` (``event`` is the event's name when known, else ``-``)."""
    db = _connect(root, create=True)
    assert db is not None
    at = format_utc(utc_now())
    try:
        with db:
            db.execute("BEGIN IMMEDIATE")
            fault_counts.add(db, {kind: 1}, at)
            db.execute("INSERT INTO log (at, kind, agent, event) VALUES (?, ?, ?, ?)",
                       (at, kind, agent, event))
            db.execute("DELETE FROM log WHERE id <= (SELECT MAX(id) FROM log) - ?", (LOG_ROWS,))
    finally:
        db.close()


def faults(root: Path) -> list[Fault]:
    """Every kind of fault noted under ``root``, by kind (none when no hook faulted)."""
    db = _connect(root, create=False)
    if db is None:
        return []
    try:
        return fault_counts.read(db)
    finally:
        db.close()


def log(root: Path) -> list[tuple[str, str, str, str]]:
    """The last faults, newest first: ``(at, kind, agent, event)``."""
    db = _connect(root, create=False)
    if db is None:
        return []
    try:
        return list(db.execute("SELECT at, kind, agent, event FROM log ORDER BY id DESC"))
    finally:
        db.close()


def take_unreported(root: Path) -> dict[str, int]:
    """The faults noted since the last call, by kind, marked reported in the same
    transaction (so two ticks never report one fault twice)."""
    db = _connect(root, create=False)
    if db is None:
        return {}
    try:
        return fault_counts.take_unreported(db)
    finally:
        db.close()
