"""File revisions: the exact bytes and identity of a regular file at one moment.

A :class:`FileRevision` names a file by its content digest, device, inode, size
and change/modification times. Two captures compare equal only when the same
inode holds the same bytes and nothing touched it in between, so a writer that
publishes by atomic rename (a new inode) never matches an older capture.

Every open here is relative to a directory descriptor and refuses to follow a
symlink in the final component (``O_NOFOLLOW``), so a path cannot be redirected
between the check and the use.

Every operating-system error ends in a documented result: capturing raises
:class:`~hostcore_file_custody.errors.FileAccessError` (permission denied, I/O
error), matching answers ``False``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

import msgspec

from hostcore_file_custody.errors import (
    CustodyError,
    OversizedRecordError,
    UnsafePathError,
    UnstableRevisionError,
    access_error,
)
from hostcore_file_custody.support import require_custody

# The hidden folder, beside the files it guards, that holds manifests and pinned files.
PRIVATE_DIR_NAME = ".custody"

_READ_CHUNK = 1 << 16
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Linux reports a no-follow open of a symlink as ELOOP, the BSDs as EMLINK.
_SYMLINK_ERRNOS = {errno.ELOOP, getattr(errno, "EMLINK", errno.ELOOP)}


class FileRevision(msgspec.Struct, frozen=True, kw_only=True):
    """One observed state of a regular file (JSON-safe, stored in manifests)."""

    digest: str
    dev: int
    ino: int
    size: int
    ctime_ns: int
    mtime_ns: int

    def same_file(self, other: FileRevision) -> bool:
        """Same inode, same bytes, same size and mtime; ctime is ignored.

        A rename updates an inode's ctime, so a file pinned by renaming it into
        the private folder is compared with this instead of ``==``.
        """
        return (
            self.digest == other.digest
            and self.dev == other.dev
            and self.ino == other.ino
            and self.size == other.size
            and self.mtime_ns == other.mtime_ns
        )


def is_single_name(name: object) -> bool:
    """Whether ``name`` is one path component custody may act on inside a folder it holds.

    A name read from a record is untrusted: ``../x`` or ``/abs/x`` would lead a
    directory-relative call out of its folder, so anything but one plain component
    (no separator, not ``.`` or ``..``, no NUL, not empty, not the private folder) is
    refused, rather than cut down to its last component.
    """
    return (isinstance(name, str) and name not in ("", ".", "..", PRIVATE_DIR_NAME)
            and "/" not in name and "\0" not in name)


def safe_name(path: Path) -> str:
    """The final component of ``path``, refusing names custody cannot act on."""
    name = path.name
    if not is_single_name(name):
        raise UnsafePathError(f"{path}: not a file name custody can act on")
    return name


def open_dir(path: Path, dir_fd: int | None = None) -> int:
    """Open a directory without following a symlink in its final component."""
    try:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _SYMLINK_ERRNOS or exc.errno == errno.ENOTDIR:
            raise UnsafePathError(f"{path}: not a directory (or a symlink to one)") from None
        raise


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` inside ``dir_fd``; ``None`` when absent."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def identity_matches(st: os.stat_result, expected: FileRevision) -> bool:
    """Whether a stat result could be the file ``expected`` names (no byte read)."""
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_dev == expected.dev
        and st.st_ino == expected.ino
        and st.st_size == expected.size
        and st.st_mtime_ns == expected.mtime_ns
        and st.st_ctime_ns == expected.ctime_ns
    )


def capture_at(dir_fd: int, name: str, *, where: str, limit: int | None = None,
               keep: bool = True) -> tuple[FileRevision, bytes] | None:
    """Capture ``name`` inside ``dir_fd``: its revision and bytes, or ``None`` if absent.

    ``limit`` caps the size of a record read to decode: a larger file raises
    :class:`OversizedRecordError` after one ``fstat``, before a byte is read (and
    one growing past it while read raises the same). ``keep=False`` digests the
    bytes as they come and returns ``b""``: memory stays one chunk whatever the size.

    Raises :class:`UnsafePathError` for a symlink or a non-regular file,
    :class:`UnstableRevisionError` when the file changed, or its name moved to
    another inode, while it was read, and :class:`FileAccessError` for any other
    OS error (a mode-000 file, an I/O error). ``where`` names the file in errors.
    """
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _SYMLINK_ERRNOS:
            raise UnsafePathError(f"{where}: is a symlink; custody never follows one") from None
        raise access_error(where, exc) from None
    digest = hashlib.sha256()
    chunks = []
    size = 0
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise UnsafePathError(f"{where}: not a regular file")
        if limit is not None and before.st_size > limit:
            raise OversizedRecordError(where, before.st_size, limit)
        while chunk := os.read(fd, _READ_CHUNK):
            size += len(chunk)
            if limit is not None and size > limit:
                raise OversizedRecordError(where, size, limit)
            digest.update(chunk)
            if keep:
                chunks.append(chunk)
        after = os.fstat(fd)
    except OSError as exc:
        raise access_error(where, exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        named = lstat_at(dir_fd, name)
    except OSError as exc:
        raise access_error(where, exc) from None
    stable = (
        _stat_key(before) == _stat_key(after)
        and size == after.st_size
        and named is not None
        and (named.st_dev, named.st_ino) == (after.st_dev, after.st_ino)
    )
    if not stable:
        raise UnstableRevisionError(f"{where}: changed or moved while its revision was captured")
    revision = FileRevision(
        digest=digest.hexdigest(),
        dev=after.st_dev,
        ino=after.st_ino,
        size=after.st_size,
        ctime_ns=after.st_ctime_ns,
        mtime_ns=after.st_mtime_ns,
    )
    return revision, data


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def capture_file_revision_and_bytes(
    path: str | os.PathLike[str], *, limit: int | None = None,
) -> tuple[FileRevision, bytes] | None:
    """Like :func:`capture_file_revision`, also returning the bytes that were digested
    (refusing, with :class:`OversizedRecordError`, a file over ``limit`` bytes)."""
    return _capture_path(path, limit=limit, keep=True)


def _capture_path(path: str | os.PathLike[str], *, limit: int | None,
                  keep: bool) -> tuple[FileRevision, bytes] | None:
    require_custody()
    path = Path(path)
    name = safe_name(path)
    try:
        dir_fd = open_dir(path.parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise access_error(str(path.parent), exc) from None
    try:
        return capture_at(dir_fd, name, where=str(path), limit=limit, keep=keep)
    finally:
        os.close(dir_fd)


def capture_file_revision(path: str | os.PathLike[str]) -> FileRevision | None:
    """The current revision of the regular file at ``path``; ``None`` when absent.

    The bytes are digested as they are read, never held: any size costs one chunk.
    Raises :class:`~hostcore_file_custody.errors.UnsafePathError` for a symlink,
    a non-regular file or an unusable name,
    :class:`~hostcore_file_custody.errors.UnstableRevisionError` when the file
    changed while it was read (a writer is active: nothing may act on it now), and
    :class:`~hostcore_file_custody.errors.FileAccessError` when the system refuses
    to read it (permission denied, I/O error).
    """
    captured = _capture_path(path, limit=None, keep=False)
    return None if captured is None else captured[0]


def file_revision_matches(path: str | os.PathLike[str], expected: FileRevision) -> bool:
    """Whether ``path`` holds exactly ``expected`` now.

    False whenever that cannot be shown: absent, replaced, modified, a symlink,
    changing while read, or unreadable (a match that cannot be checked is not one).
    """
    try:
        current = capture_file_revision(path)
    except CustodyError:
        return False
    return current == expected
