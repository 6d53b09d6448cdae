"""The few file operations custody is built from, each with the fewest system calls.

* :func:`publish` / :func:`publish_at` replace a file atomically (temp file in the
  same folder, then ``rename``), fsynced only when asked: readers see the old or
  the new bytes, never a torn file. Unlike a general helper they never ``mkdir``:
  callers create their folders once.
* :func:`rename_noreplace` is ``renameat2(RENAME_NOREPLACE)``: an atomic move that
  fails rather than overwrite whatever lives at the target, for files and folders.
* :func:`put_back_method` probes, once per filesystem and before the first pin,
  how pinned files can go back without clobbering: by that rename, else by a hard
  link, else not at all (custody is then refused there).

Temp files are named ``.<name>.<token>.tmp``; a writer killed between create and
rename leaves one behind, which :mod:`.maintenance` prunes by age.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from hostcore_file_custody.errors import OversizedRecordError

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_SUFFIX = ".tmp"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_READ_RECORD = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC

PutBack = Literal["rename", "link"]

# Errors meaning "this filesystem cannot do that at all", as opposed to a failure now.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP,
                          errno.EPERM, errno.EMLINK, errno.EXDEV})
_RENAME_NOREPLACE = 1


def temp_name(name: str) -> str:
    return f".{name}.{os.urandom(4).hex()}{TEMP_SUFFIX}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_capped(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None,
                ) -> bytes | None:
    """The bytes of the record at ``path`` (inside ``dir_fd`` if given); ``None`` if absent.

    A symlink is not followed (``OSError(ELOOP)``), a FIFO never blocks the open,
    and a file over ``limit`` bytes raises :class:`OversizedRecordError` after one
    ``fstat``: no read of a record costs more than its cap.
    """
    try:
        fd = os.open(path, _READ_RECORD, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        if st.st_size > limit:
            raise OversizedRecordError(str(path), st.st_size, limit)
        chunks = []
        size = 0
        while chunk := os.read(fd, limit + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OversizedRecordError(str(path), size, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(path: Path, data: bytes, *, durable: bool) -> None:
    """Replace ``path`` with ``data`` atomically; fsync the file and its folder if ``durable``.

    Raises ``OSError`` (``FileNotFoundError`` when the folder is missing) with no
    temp file left behind.
    """
    tmp = path.parent / temp_name(path.name)
    _publish(lambda flags: os.open(tmp, flags, FILE_MODE), data, durable,
             lambda: os.rename(tmp, path), lambda: os.unlink(tmp))
    if durable:
        fsync_dir(path.parent)


def publish_at(dir_fd: int, name: str, data: bytes, *, durable: bool) -> None:
    """:func:`publish` of ``name`` inside the folder open as ``dir_fd``."""
    tmp = temp_name(name)
    _publish(lambda flags: os.open(tmp, flags, FILE_MODE, dir_fd=dir_fd), data, durable,
             lambda: os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd),
             lambda: os.unlink(tmp, dir_fd=dir_fd))
    if durable:
        os.fsync(dir_fd)


def _publish(open_tmp: Callable[[int], int], data: bytes, durable: bool,
             rename: Callable[[], None], unlink: Callable[[], None]) -> None:
    fd = open_tmp(_NEW_FILE)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        rename()
    except BaseException:
        # The temp file is ours alone: removing it loses nothing.
        with contextlib.suppress(OSError):
            unlink()
        raise


def _load_renameat2() -> Callable[..., int] | None:
    """The C library's ``renameat2``. Loaded when this module is imported (by the
    sweep, recovery or status, never by building a host), not on first use: a
    process that drops privileges later may no longer be able to import ctypes."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None  # a C library older than glibc 2.28
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function



_RENAMEAT2 = _load_renameat2()


def rename_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Move ``src`` to ``dst`` atomically, failing with ``FileExistsError`` if ``dst`` exists.

    Raises ``OSError(ENOSYS)`` where the C library has no ``renameat2``.
    """
    renameat2 = _RENAMEAT2
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is unavailable")
    if renameat2(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst),
                 _RENAME_NOREPLACE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# Put-back support by filesystem (st_dev), probed once per process.
_PUT_BACK: dict[int, PutBack | None] = {}


def put_back_method(private_fd: int) -> PutBack | None:
    """How pinned files can go back to their folder on this filesystem without clobbering.

    ``"rename"`` (``renameat2(RENAME_NOREPLACE)``), else ``"link"`` (a hard link,
    which also fails on an existing name), else ``None``. Probed with a file of
    our own in the private folder, before the first pin; raises ``OSError`` when
    the probe itself fails (no space, say): then nothing can be decided.
    """
    device = os.fstat(private_fd).st_dev
    if device in _PUT_BACK:
        return _PUT_BACK[device]
    probe = f".probe-{os.urandom(6).hex()}"
    moved = f"{probe}.moved"
    os.close(os.open(probe, _NEW_FILE, FILE_MODE, dir_fd=private_fd))
    try:
        method: PutBack | None = None
        try:
            rename_noreplace(private_fd, probe, private_fd, moved)
            method = "rename"
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            try:
                os.link(probe, moved, src_dir_fd=private_fd, dst_dir_fd=private_fd,
                        follow_symlinks=False)
                method = "link"
            except OSError as link_exc:
                if link_exc.errno not in _UNSUPPORTED:
                    raise
    finally:
        for name in (probe, moved):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=private_fd)
    _PUT_BACK[device] = method
    return method


def put_back(method: PutBack, src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
    """Make ``src`` reachable as ``dst`` again without overwriting anything at ``dst``.

    ``"rename"`` moves the inode back in one atomic step; ``"link"`` adds the
    name, and the caller then drops ``src``: returns True when it must (``src``
    was linked, not moved). A folder (one swapped in at the pin moment) cannot be
    hard-linked: with ``"link"`` it is renamed back after checking ``dst`` is
    absent, where at worst an empty folder made in between is replaced (a rename
    never replaces anything else). Raises ``FileExistsError`` when something
    lives at ``dst``, ``OSError`` on any other failure.
    """
    if method == "rename":
        rename_noreplace(src_dir_fd, src, dst_dir_fd, dst)
        return False
    if stat.S_ISDIR(os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False).st_mode):
        move_noreplace(src_dir_fd, src, dst_dir_fd, dst)
        return False
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    return True


def move_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Move ``src`` to ``dst`` without overwriting; where ``renameat2`` is missing, a
    plain rename after checking ``dst`` is absent (for names nobody else creates)."""
    try:
        rename_noreplace(src_dir_fd, src, dst_dir_fd, dst)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED or exc.errno == errno.EPERM:
            raise
        try:
            os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST)) from None
