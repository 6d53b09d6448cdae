"""Which watched folders gained or lost an entry, from Linux ``inotify``.

The dotfile policy input asks "does this folder hold a ``.hostcoreignore``?" of
every folder on the path of every evidence directory. Asking again by ``stat``
costs a system call per folder per check, which grows with the store; a watch
costs one call per folder once, and then one ``read`` per check that names only
the folders where something came or went. Only entries arriving or leaving
matter (a dotfile's bytes never change a verdict), so a dotfile's edits in place
raise no event.

:meth:`FolderWatch.open` is ``None`` where ``inotify`` is missing (not Linux, a
C library without it, no instance left): callers then look at each folder as
before. A folder whose watch cannot be added says why: one that is missing needs
no watch of its own while its parent has one (it can only appear as an entry
there); over the per-user limit, callers keep looking at that folder.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
import weakref
from collections.abc import Callable

_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_MASK = (_IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF
         | _IN_MOVE_SELF | _IN_ONLYDIR)
# The watched folder itself went away: its path may name another folder now.
_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows
_READ_BYTES = 64 * 1024


class Changes:
    """What one :meth:`FolderWatch.changes` read found.

    ``folders``: watched folders where an entry came or went (or which went
    themselves); ``entries``: the paths of those entries, since one may be a
    folder of interest made, moved or removed; ``overflow``: the kernel dropped
    events, so nothing can be trusted until everything is looked at again.
    """

    __slots__ = ("entries", "folders", "overflow")

    def __init__(self) -> None:
        self.folders: set[str] = set()
        self.entries: set[str] = set()
        self.overflow = False


class FolderWatch:
    """One ``inotify`` instance watching folders for entries coming and going."""

    def __init__(self, fd: int, add: Callable[[int, bytes, int], int],
                 remove: Callable[[int, int], int]) -> None:
        self._fd = fd
        self._add = add
        self._remove = remove
        # One watch per inode: two paths reaching one folder share it.
        self._paths: dict[int, set[str]] = {}
        self._wd_of: dict[str, int] = {}
        # Instances are few per user (128 by default) and shared by every process:
        # the descriptor goes with the object, not with the process.
        weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls) -> FolderWatch | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, add, remove = (libc.inotify_init1, libc.inotify_add_watch,
                                 libc.inotify_rm_watch)
        except (OSError, AttributeError):
            return None
        init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
        add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
        remove.argtypes, remove.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return None  # the per-user instance limit, say: look at folders instead
        return cls(fd, add, remove)

    def watch(self, folder: str) -> int:
        """Watch ``folder`` (again: after a move its path may name another inode).
        Returns 0, or the ``errno`` of why it cannot be watched: missing
        (``ENOENT``, ``ENOTDIR``), over the limit (``ENOSPC``), refused."""
        wd = self._add(self._fd, os.fsencode(folder), _MASK)
        if wd < 0:
            self._forget(folder)
            return ctypes.get_errno() or errno.EIO
        old = self._wd_of.get(folder)
        if old is not None and old != wd:
            self._forget(folder)
        self._wd_of[folder] = wd
        self._paths.setdefault(wd, set()).add(folder)
        return 0

    def watching(self, folder: str) -> bool:
        return folder in self._wd_of

    def changes(self) -> Changes:
        """Drain the events the kernel queued since the last call."""
        found = Changes()
        while True:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return found
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                found.overflow = True  # cannot say what happened: look at everything
                return found
            self._parse(data, found)

    def _parse(self, data: bytes, found: Changes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size
            name = os.fsdecode(data[offset:offset + length].rstrip(b"\0"))
            offset += length
            if mask & _IN_Q_OVERFLOW:
                found.overflow = True
                continue
            folders = self._paths.get(wd, set())
            found.folders |= folders
            if name:
                found.entries.update(os.path.join(folder, name) for folder in folders)
            if mask & _GONE:
                for folder in list(folders):
                    self._forget(folder)

    def _forget(self, folder: str) -> None:
        wd = self._wd_of.pop(folder, None)
        if wd is None:
            return
        paths = self._paths.get(wd)
        if paths is not None:
            paths.discard(folder)
            if not paths:
                del self._paths[wd]
                self._remove(self._fd, wd)
