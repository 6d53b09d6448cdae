"""Faults counted by kind in a ``faults`` table, and the tick step that reports them.

Some work swallows its faults so that nobody waits on it: an agent's hook exits 0
whatever went wrong, the staleness gate answers every target it can. What such a
domain could not do is counted here by kind, in a SQLite table of its own store;
``hostcore status`` shows the counts (:func:`status`) and the domain's worker
reports what was counted since the last tick, once, by failing its step
(:func:`report_new`), so ``run --once`` exits 1 and cron sees it. Kinds, counts and
times only: never a path, a session or a message's text.

The callers own their connections and transactions: the hook writes its fault log
in the same transaction as the count.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import msgspec

from hostcore.errors import HostcoreError
from hostcore.plugin.registration import StepFailed, WorkerResult

SCHEMA = ("CREATE TABLE IF NOT EXISTS faults (kind TEXT PRIMARY KEY, count INTEGER NOT NULL, "
          "last_at TEXT NOT NULL, reported INTEGER NOT NULL DEFAULT 0)")


class Fault(msgspec.Struct, frozen=True):
    """One kind of fault: how many there were, the last one's time, and how many a
    tick's step has reported already."""

    kind: str
    count: int
    last_at: str
    reported: int


def add(db: sqlite3.Connection, counts: Mapping[str, int], at: str) -> None:
    """Add ``counts`` (kind -> how many), inside the caller's transaction."""
    db.executemany("INSERT INTO faults (kind, count, last_at) VALUES (?, ?, ?) "
                   "ON CONFLICT (kind) DO UPDATE SET count = count + excluded.count, "
                   "last_at = excluded.last_at",
                   [(kind, n, at) for kind, n in sorted(counts.items())])


def read(db: sqlite3.Connection) -> list[Fault]:
    """Every kind counted, by kind."""
    return [Fault(*row) for row in db.execute(
        "SELECT kind, count, last_at, reported FROM faults ORDER BY kind")]


def take_unreported(db: sqlite3.Connection) -> dict[str, int]:
    """What was counted since the last call, by kind, marked reported in the same
    transaction (two ticks never report one fault twice)."""
    with db:
        db.execute("BEGIN IMMEDIATE")
        new = {kind: count - reported for kind, count, reported in db.execute(
            "SELECT kind, count, reported FROM faults WHERE count > reported")}
        db.execute("UPDATE faults SET reported = count")
    return new


def status(found: list[Fault]) -> dict[str, object]:
    """A worker's ``status()``: the count of every kind and the last fault's time."""
    return {"faults": {f.kind: f.count for f in found},
            "last_fault_at": max((f.last_at for f in found), default=None)}


def report_new(new: Mapping[str, int], error: type[HostcoreError], what: str,
               after: str) -> WorkerResult:
    """A worker's ``run()``: fail the step naming ``new``'s kinds and counts (``what``
    names the faults, ``after`` ends the message), or succeed when nothing is new."""
    if new:
        listed = ", ".join(f"{kind}={n}" for kind, n in sorted(new.items()))
        raise StepFailed(dict(new)) from error(
            f"{sum(new.values())} {what} since the last tick ({listed}); {after}")
    return WorkerResult()
