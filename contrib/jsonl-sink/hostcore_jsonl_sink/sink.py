"""An append-only JSON Lines file of telemetry events, rotated by size.

Files, in the folder the sink is given (the plugin uses its state folder)::

    events.jsonl        the live file: one JSON object per line, oldest first
    events.jsonl.1      the most recently rotated file
    events.jsonl.<n>    older, up to ``keep`` rotated files; older ones are dropped

Each line is an encoded :class:`hostcore.telemetry.Event`:
``{"name": "tick.completed", "ts": 1764425000.25, "attributes": {"steps": 2}}``.

Why appends and not :func:`hostcore.files.atomic_write`: the file is a log, not a
state file that is replaced. Each event is one ``write(2)`` of one whole line to a
file opened with ``O_APPEND``, so several hosts sharing a root (a ``run`` loop and a
``status`` command) interleave whole lines, never bytes.

fsync policy: lines are not fsynced one by one. A crashed process loses nothing
(the kernel holds every completed write); a power cut may lose the last lines
written before it, and may leave a torn last line, which readers must skip.
Telemetry is counts, not state, and a disk flush per event would cost more than
the event. Rotation is durable: the live file is fsynced before it is renamed,
and the folder after, so rotating never loses or duplicates a line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from hostcore.files import ensure_dir, file_lock, fsync_dir, open_state_file
from hostcore.records import encode_json
from hostcore.telemetry import Event

FILE_NAME = "events.jsonl"
LOCK_NAME = ".events.jsonl.lock"
# Rotate the live file before a line would take it past this size.
MAX_BYTES = 8 * 1024 * 1024
# How many rotated files to keep beside the live one, and the most allowed:
# rotating renames each kept file, so a huge keep would make every rotation slow.
KEEP = 3
KEEP_MAX = 100

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT


class JsonlSink:
    """A telemetry sink appending each event to ``<folder>/events.jsonl``.

    :param folder: where the live and rotated files live (created if missing).
    :param max_bytes: rotate before a line would push the live file past this.
        A single line longer than this still gets a file of its own.
    :param keep: rotated files kept (at most :data:`KEEP_MAX`); ``0`` deletes the
        live file when it is full.

    Files are opened without following symlinks, and nothing is written into a
    folder that is a symlink or that other users can write to (each event then
    fails, and the host counts the sink's failures).
    """

    name = "jsonl"

    def __init__(self, folder: Path, *, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        if max_bytes <= 0 or not 0 <= keep <= KEEP_MAX:
            raise ValueError(f"max_bytes must be positive and keep between 0 and {KEEP_MAX}")
        # Created at the first event, not here: building a host (for a read-only
        # command, say) must create nothing under the root.
        self.folder = Path(folder)
        self.path = self.folder / FILE_NAME
        self.max_bytes = max_bytes
        self.keep = keep
        self.written = 0

    def receive(self, event: Event) -> None:
        line = encode_json(event) + b"\n"
        if not self.written:
            _check_folder(ensure_dir(self.folder))
        # Opened per event: another process may rotate the file between two
        # events, and a descriptor kept open would then append to the rotated file.
        fd = open_state_file(self.path, _OPEN_FLAGS)
        try:
            size = os.fstat(fd).st_size
            if size and size + len(line) > self.max_bytes:
                os.close(fd)
                fd = -1
                self._rotate(len(line))
                fd = open_state_file(self.path, _OPEN_FLAGS)
            _write_all(fd, line)
        finally:
            if fd >= 0:
                os.close(fd)
        self.written += 1

    def _rotate(self, incoming: int) -> None:
        with self._rotation_lock():
            # Another host may have rotated while we waited for the lock.
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                return
            if not size or size + incoming <= self.max_bytes:
                return
            fd = open_state_file(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if self.keep == 0:
                self.path.unlink()
            else:
                for n in range(self.keep - 1, 0, -1):
                    older = self.rotated(n)
                    if older.exists():
                        os.replace(older, self.rotated(n + 1))
                os.replace(self.path, self.rotated(1))
            fsync_dir(self.folder)

    def _rotation_lock(self) -> contextlib.AbstractContextManager[None]:
        return file_lock(self.folder / LOCK_NAME)

    def rotated(self, n: int) -> Path:
        """The path of the ``n``-th most recent rotated file (1 is the newest)."""
        return self.folder / f"{FILE_NAME}.{n}"

    def files(self) -> list[Path]:
        """Existing files, oldest first, so reading them in order replays the events."""
        candidates = [self.rotated(n) for n in range(self.keep, 0, -1)] + [self.path]
        return [p for p in candidates if p.exists()]

    def status(self) -> dict[str, int]:
        files = self.files()
        return {
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "written": self.written,
        }


def _check_folder(folder: Path) -> None:
    """Refuse a folder that is a symlink or that another user could plant one in."""
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode):
        raise OSError(errno.ENOTDIR, "not a folder (a symlink?)", str(folder))
    if found.st_mode & 0o022:
        raise OSError(errno.EPERM, "other users can write to it", str(folder))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
