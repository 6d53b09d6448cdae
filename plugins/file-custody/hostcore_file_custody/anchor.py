"""The registry root held open: a pass acts only below one verified descriptor.

A path is resolved again at every use, so a registry root swapped for a symlink
(or renamed away and replaced) in the middle of a pass would send the pass's
later deletions into whatever the path names by then. A sweep or a recovery
therefore opens the root once without following a symlink (``O_NOFOLLOW |
O_DIRECTORY``), checks who may write it, and opens each of its folders below
that descriptor the same way; its scans, reads and deletions are relative to
those descriptors. Before each step that can delete, :meth:`RegistryAnchor.still_rooted`
checks that the root's path still names the folder held open; when it does not,
the pass stops (the lock files, named by path, would be another registry's).

A registry folder owned by another user, or that every user may write (mode
``o+w``), is refused whole, as PostgreSQL refuses a data directory with the
wrong owner or mode: anyone could plant or swap the files a sweep acts on.
The private ``.custody`` folders have their own, stricter check (owner-only).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from hostcore_file_custody.errors import RegistryRefused

# The folders of a registry (see registry.py), each opened below the root's descriptor.
FOLDERS = ("heartbeats", "pid-map", "prompt-hash", "generations", "locks", "audit")

_OPEN_DIR = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
# Linux reports a no-follow open of a symlink as ELOOP, the BSDs as EMLINK.
_SYMLINK_ERRNOS = {errno.ELOOP, getattr(errno, "EMLINK", errno.ELOOP)}


def folder_problem(st: os.stat_result, where: Path) -> RegistryRefused | None:
    """Why a registry folder with stat ``st`` is refused, or ``None`` when it may be used."""
    if not stat.S_ISDIR(st.st_mode):
        return RegistryRefused(f"{where}: not a directory", "not-a-directory")
    if st.st_uid != os.geteuid():
        return RegistryRefused(
            f"{where}: owned by uid {st.st_uid}, not by the user running custody "
            f"(uid {os.geteuid()}); custody refuses it (chown it, or run as its owner)",
            "foreign-owner")
    if st.st_mode & stat.S_IWOTH:
        return RegistryRefused(
            f"{where}: writable by every user (mode {stat.S_IMODE(st.st_mode):o}); custody "
            f"refuses it (chmod o-w {where})", "world-writable")
    return None


def _open_checked(name: str | Path, where: Path, dir_fd: int | None) -> int | None:
    """The folder ``name`` opened and checked; ``None`` when absent or, below the
    root (``dir_fd`` given), a plain file: what needs that folder then fails alone,
    counted, as with any file the system refuses."""
    try:
        fd = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _SYMLINK_ERRNOS or (
                exc.errno == errno.ENOTDIR and _is_symlink(name, dir_fd)):
            raise RegistryRefused(f"{where}: is a symlink; custody acts only on the folder "
                                  "itself (configure the folder it points to)",
                                  "symlink") from None
        if exc.errno == errno.ENOTDIR:
            if dir_fd is not None:
                return None
            raise RegistryRefused(f"{where}: not a directory", "not-a-directory") from None
        raise
    problem = folder_problem(os.fstat(fd), where)
    if problem is not None:
        os.close(fd)
        raise problem
    return fd


def _is_symlink(name: str | Path, dir_fd: int | None) -> bool:
    # O_DIRECTORY may be checked before O_NOFOLLOW: a symlink to a file reads ENOTDIR.
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class RegistryAnchor:
    """A registry's root and folders, open as verified descriptors for one pass.

    Build it with :meth:`open`; close it (or use it as a context manager) when the
    pass ends. ``folder(name)`` is ``None`` for a folder that did not exist.
    """

    def __init__(self, root: Path, fd: int, folders: dict[str, int]) -> None:
        self.root = root
        self.fd = fd
        self._folders = folders
        held = os.fstat(fd)
        self._identity = (held.st_dev, held.st_ino)

    @classmethod
    def open(cls, root: Path) -> RegistryAnchor | None:
        """Open ``root`` and its folders; ``None`` when ``root`` does not exist.

        Raises :class:`RegistryRefused` when the root or one of its folders is a
        symlink, not a folder, another user's or world-writable; ``OSError`` when
        the system refuses to open one.
        """
        fd = _open_checked(root, root, None)
        if fd is None:
            return None
        folders: dict[str, int] = {}
        try:
            for name in FOLDERS:
                folder_fd = _open_checked(name, root / name, fd)
                if folder_fd is not None:
                    folders[name] = folder_fd
        except BaseException:
            for folder_fd in folders.values():
                os.close(folder_fd)
            os.close(fd)
            raise
        return cls(root, fd, folders)

    def folder(self, name: str) -> int | None:
        return self._folders.get(name)

    def still_rooted(self) -> bool:
        """Whether the root's path still names the folder held open (not a symlink)."""
        try:
            named = os.lstat(self.root)
        except OSError:
            return False
        return stat.S_ISDIR(named.st_mode) and (named.st_dev, named.st_ino) == self._identity

    def close(self) -> None:
        for folder_fd in self._folders.values():
            os.close(folder_fd)
        self._folders = {}
        os.close(self.fd)

    def __enter__(self) -> RegistryAnchor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

