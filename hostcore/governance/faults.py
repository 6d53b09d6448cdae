"""The gate's faults, counted by kind in the stamp store (a ``faults`` table of
``<root>/governance/stamps.sqlite3``).

A fault is something that kept the gate from a full answer: a governing input
that could not be read (``input_unknown``, per target judged under it), a plugin
whose ``hostcore_governance_inputs`` raised or answered garbage (``input_failed``,
per plugin and command), a file an agent wrote that could not be stamped
(``stamp_outside_repository``, ``stamp_target_gone``), the gate's own hook raising
(``gate_failed``). None of them stops the others' targets: each is counted here,
shown by ``hostcore status`` (the ``governance`` worker's ``faults``) and reported
once by the next tick's ``governance`` step, which then fails, so ``run --once``
exits 1. Kinds, counts and the last time only: never a path, a plugin's message,
a session.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path

from hostcore.governance.stamps import BUSY_SECONDS, FILE, Stamps
from hostcore.plugin import fault_counts
from hostcore.plugin.fault_counts import Fault
from hostcore.timestamps import format_utc, utc_now

INPUT_UNKNOWN = "input_unknown"
INPUT_FAILED = "input_failed"
# The hook's own kinds (stamp_outside_repository, stamp_target_gone) are named in
# hostcore.governance.hook, which a hook loads without this module.
GATE_FAILED = "gate_failed"


__all__ = ["GATE_FAILED", "INPUT_FAILED", "INPUT_UNKNOWN", "Fault", "faults", "note",
           "take_unreported"]


def note(root: Path, counts: Mapping[str, int], *, read_only: bool = False) -> None:
    """Add ``counts`` (kind -> how many) to the root's fault counts.

    ``read_only`` (a reporting command's host): counted only into a stamp store
    that already exists, never creating one; a store that cannot take the count
    then leaves it uncounted, since the command has already said the fault on
    stderr and in its exit status.
    """
    counts = {kind: n for kind, n in counts.items() if n > 0}
    if not counts:
        return
    at = format_utc(utc_now())
    if read_only:
        if not (root / FILE).exists():
            return
        with contextlib.suppress(sqlite3.Error), _existing(root) as db:
            _add(db, counts, at)
        return
    store = Stamps(root)
    try:
        _add(store.connection(), counts, at)
    finally:
        store.close()


def faults(root: Path) -> list[Fault]:
    """Every kind of fault counted under ``root``, by kind (none before any)."""
    if not (root / FILE).exists():
        return []
    try:
        with _existing(root, mode="ro") as db:
            return fault_counts.read(db)
    except sqlite3.OperationalError:
        return []  # a store from before faults were counted: none counted


def take_unreported(root: Path) -> dict[str, int]:
    """The faults counted since the last call, by kind, marked reported in the same
    transaction (two ticks never report one fault twice)."""
    if not (root / FILE).exists():
        return {}
    try:
        with _existing(root) as db:
            return fault_counts.take_unreported(db)
    except sqlite3.OperationalError:
        return {}


def _add(db: sqlite3.Connection, counts: Mapping[str, int], at: str) -> None:
    with db:
        db.execute("BEGIN IMMEDIATE")
        fault_counts.add(db, counts, at)


@contextlib.contextmanager
def _existing(root: Path, *, mode: str = "rw") -> Iterator[sqlite3.Connection]:
    """The existing stamp store, opened without creating it or its tables."""
    path = root / FILE
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True,
                         timeout=BUSY_SECONDS, isolation_level=None)
    try:
        yield db
    finally:
        db.close()
