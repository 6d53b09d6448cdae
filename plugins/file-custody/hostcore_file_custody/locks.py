"""Kernel ``flock`` locks on per-owner lock files, with every acquisition counted.

A lock file is locked exclusively and never waited on inside the kernel: an
attempt either takes the lock at once or reports it held. The kernel releases a
``flock`` when the last descriptor of its open file closes, which happens when
the holding process dies, so a lock that can be taken proves its holder is gone.

Lock files may be unlinked by whoever holds them. A locker therefore checks,
after taking the lock, that its name still leads to the locked inode; if not it
let go and tries again (the name now leads to a newer file).

:data:`LOCKS` counts every acquisition attempt (taken or refused), in-process
custody mutexes included, so benchmarks and tests can show what an operation
costs.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Literal

import tenacity

from hostcore_file_custody.errors import CustodyRefused

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
LOCK_FILE_MODE = 0o600
# Pause between attempts while waiting for a briefly held lock (seconds).
LOCK_RETRY_PAUSE_SECONDS = 0.01
# Attempts when the lock file's name keeps moving to a newer inode under us.
LOCK_MOVED_ATTEMPTS = 5


class LockCounter:
    """How many lock acquisitions were attempted in this process.

    Instrumentation only: increments are not atomic across threads, so counts
    taken while several threads lock at once may come out short.
    """

    def __init__(self) -> None:
        self.acquisitions = 0

    def add(self) -> None:
        self.acquisitions += 1


LOCKS = LockCounter()


class _LockFileMoved(Exception):
    """The locked inode is no longer the one the lock file's name leads to."""


def _open_lock_file(path: Path, *, create: bool) -> int:
    flags = os.O_RDWR | _NOFOLLOW | _CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, LOCK_FILE_MODE)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CustodyRefused(
            f"{path}: lock file cannot be opened safely ({os.strerror(exc.errno or 0)})",
            "uncertain",
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CustodyRefused(f"{path}: lock file is not a regular file", "uncertain")
    return fd


def try_flock(fd: int) -> bool:
    """One counted, non-blocking attempt at an exclusive ``flock``."""
    LOCKS.add()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _still_named(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _attempt(path: Path) -> int:
    fd = _open_lock_file(path, create=True)
    try:
        taken = try_flock(fd)
    except OSError as exc:
        os.close(fd)
        raise CustodyRefused(f"{path}: cannot lock ({exc})", "uncertain") from None
    if not taken:
        os.close(fd)
        raise CustodyRefused(f"{path}: held by a live owner", "held")
    if not _still_named(fd, path):
        os.close(fd)  # closing drops the lock
        raise _LockFileMoved(str(path))
    return fd


def lock_exclusive(path: Path, *, wait_seconds: float = 0.0) -> int:
    """Take the exclusive lock of ``path`` (created if missing); return its descriptor.

    Raises :class:`CustodyRefused` (``"held"``) when another open file holds it
    for longer than ``wait_seconds``, or (``"uncertain"``) when the file cannot
    be trusted. Closing the descriptor releases the lock.
    """
    if wait_seconds <= 0:
        try:
            return _attempt(path)  # the usual case: one attempt, no retry machinery
        except _LockFileMoved:
            pass

    def stop(state: tenacity.RetryCallState) -> bool:
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, _LockFileMoved):
            return state.attempt_number >= LOCK_MOVED_ATTEMPTS
        return state.seconds_since_start is None or state.seconds_since_start >= wait_seconds

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(
            lambda exc: isinstance(exc, _LockFileMoved)
            or (isinstance(exc, CustodyRefused) and exc.reason == "held")
        ),
        stop=stop,
        wait=tenacity.wait_fixed(LOCK_RETRY_PAUSE_SECONDS),
        reraise=True,
    )
    try:
        return retrying(_attempt, path)
    except _LockFileMoved:
        raise CustodyRefused(f"{path}: lock file keeps being replaced", "uncertain") from None


def probe_lock(path: Path) -> Literal["free", "held"] | None:
    """Whether the lock of ``path`` is free or held, without keeping it.

    ``None`` when the file is absent or cannot be probed: no evidence either way.
    """
    try:
        fd = _open_lock_file(path, create=False)
    except (FileNotFoundError, CustodyRefused):
        return None
    try:
        return "free" if try_flock(fd) else "held"
    except OSError:
        return None
    finally:
        os.close(fd)
