"""Atomic file writes: the one helper every state write in hostcore goes through.

A reader sees either the old file or the new one, never a torn write, and after
``atomic_write`` returns the new content survives a power cut (the data and the
directory entry are both fsynced).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

STATE_FILE_MODE = 0o600
STATE_DIR_MODE = 0o700


def ensure_dir(path: Path, mode: int = STATE_DIR_MODE) -> Path:
    """Create ``path`` (and parents) with owner-only permissions if missing."""
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    return path


def atomic_write(
    path: Path, data: bytes, mode: int = STATE_FILE_MODE, *, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, fsync dir.

    ``durable=False`` skips both fsyncs: the replacement stays atomic for every
    reader and survives the writer's death, but not a power cut. Only for files
    that are disposable or whose protocol covers process death alone (custody
    manifests, heartbeat caches), where two fsyncs per write would dominate.
    """
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        # The temp file is ours alone; removing it loses nothing.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
