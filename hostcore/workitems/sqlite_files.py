"""What the ledger's two SQLite files, the index and the archive, open and read alike.

Each keeps its own pragmas (the archive is the truth and syncs every commit, the index
is re-derivable and never syncs); both are owner-only files with a ``meta`` table of
text values by key.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from hostcore.files import ensure_dir, open_state_file


def connect_owned(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file ``path``, created owner-only when missing, whose
    transactions begin deferred; usable from any thread, one call at a time."""
    ensure_dir(path.parent)
    if not path.exists():
        # Owner-only, whatever the umask; SQLite's journal copies this mode.
        os.close(open_state_file(path, os.O_RDWR | os.O_CREAT))
    db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    db.isolation_level = "DEFERRED"
    return db


def meta_value(db: sqlite3.Connection, key: str) -> str | None:
    """The ``meta`` table's value for ``key``, ``None`` when it has none."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])
