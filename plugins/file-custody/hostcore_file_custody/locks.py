"""Kernel ``flock`` locks on per-owner lock files, with every acquisition counted.

A lock file is locked exclusively and never waited on inside the kernel: an
attempt either takes the lock at once or reports it held. The kernel releases a
``flock`` when the last descriptor of its open file closes, which happens when
the holding process dies, so a lock that can be taken proves its holder is gone.

Two things would break that proof, and both are closed here:

* **Inherited descriptors.** A ``fork`` duplicates every descriptor, so a child
  would keep its parent's lock alive after the parent died. Every lock
  descriptor is opened ``O_CLOEXEC`` (gone at ``exec``) and tracked; a handler
  registered with :func:`os.register_at_fork` closes them all in the child
  (closing the child's copy leaves the parent's lock in place). Opening and
  tracking happen under a mutex the fork handler also takes, so no descriptor
  can be forked between the two.
* **Unlinked lock files.** Lock files may be unlinked by whoever holds them. A
  locker checks, after taking the lock, that its name still leads to the locked
  inode; if not it lets go and tries again.

The holder writes its role (``session``, ``sweep``, ``writer``, ``recovery``)
at the start of the lock file, so a refused locker can tell a sweep's brief
hold (worth waiting for) from a live session's (refused at once).

:data:`LOCKS` counts every acquisition attempt (taken or refused), in-process
custody mutexes included, so benchmarks and tests can show what an operation
costs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path
from typing import Literal

from hostcore_file_custody.errors import CustodyRefused
from hostcore_file_custody.support import fcntl, require_custody

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
LOCK_FILE_MODE = 0o600
# Pause between attempts while waiting for a briefly held lock (seconds).
LOCK_RETRY_PAUSE_SECONDS = 0.01
# Attempts when the lock file's name keeps moving to a newer inode under us.
LOCK_MOVED_ATTEMPTS = 5

Role = Literal["session", "sweep", "writer", "recovery"]
_ROLE_BYTES = 8  # each role is written padded to this width, so no truncate is needed
_ROLES: tuple[Role, ...] = ("session", "sweep", "writer", "recovery")
_HOLDER_WORDS = {"session": "a live session", "sweep": "a sweep", "writer": "a writer",
                 "recovery": "a recovery", "unknown": "a live owner"}


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


class LockFile:
    """An open lock file descriptor of this process (locked once returned by
    :func:`lock_exclusive`). :meth:`close` releases it; in a forked child it is
    already closed."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self.closed = False

    def close(self) -> None:
        """Close the descriptor (releasing the lock); idempotent, and a no-op in a
        forked child, where the descriptor number may name another file by now."""
        with _GUARD:
            if self.closed:
                return
            self.closed = True
            _OPEN.discard(self)
        os.close(self.fd)


# Every lock descriptor of this process, closed in forked children.
_GUARD = threading.Lock()
_OPEN: set[LockFile] = set()


def _before_fork() -> None:
    _GUARD.acquire()


def _after_fork_in_parent() -> None:
    _GUARD.release()


def _after_fork_in_child() -> None:
    # Only the forking thread survives in the child, and it holds _GUARD.
    for handle in _OPEN:
        handle.closed = True
        with contextlib.suppress(OSError):
            os.close(handle.fd)  # the child's copy only: the parent keeps its lock
    _OPEN.clear()
    _GUARD.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


class _LockFileMoved(Exception):
    """The locked inode is no longer the one the lock file's name leads to."""


def _open_lock_file(path: Path, *, create: bool) -> LockFile:
    require_custody()
    # Non-blocking too: a FIFO swapped in after a probe's lstat must not hang the open.
    flags = os.O_RDWR | _NOFOLLOW | _CLOEXEC | _NONBLOCK | (os.O_CREAT if create else 0)
    try:
        with _GUARD:
            handle = LockFile(os.open(path, flags, LOCK_FILE_MODE), path)
            _OPEN.add(handle)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CustodyRefused(
            f"{path}: lock file cannot be opened safely ({os.strerror(exc.errno or 0)})",
            "uncertain",
        ) from None
    if not stat.S_ISREG(os.fstat(handle.fd).st_mode):
        handle.close()
        raise CustodyRefused(f"{path}: lock file is not a regular file", "uncertain")
    return handle


def try_flock(fd: int) -> bool:
    """One counted, non-blocking attempt at an exclusive ``flock``."""
    assert fcntl is not None
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


def read_holder(fd: int) -> str:
    """The role the current holder wrote into the lock file, or ``"unknown"``."""
    try:
        word = os.pread(fd, _ROLE_BYTES, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return word if word in _ROLES else "unknown"


def _attempt(path: Path, role: Role) -> LockFile:
    handle = _open_lock_file(path, create=True)
    try:
        taken = try_flock(handle.fd)
    except OSError as exc:
        handle.close()
        raise CustodyRefused(f"{path}: cannot lock ({exc})", "uncertain") from None
    if not taken:
        holder = read_holder(handle.fd)
        handle.close()
        raise CustodyRefused(f"{path}: held by {_HOLDER_WORDS[holder]}", "held", holder)
    if not _still_named(handle.fd, path):
        handle.close()  # closing drops the lock
        raise _LockFileMoved(str(path))
    # Best effort: a holder that cannot say who it is (no space) is waited on as unknown.
    with contextlib.suppress(OSError):
        os.pwrite(handle.fd, role.encode().ljust(_ROLE_BYTES), 0)
    return handle


def lock_exclusive(path: Path, *, role: Role = "writer", wait_seconds: float = 0.0,
                   sweep_wait_seconds: float | None = None) -> LockFile:
    """Take the exclusive lock of ``path`` (created if missing) as ``role``.

    Raises :class:`CustodyRefused` (``"held"``) when another open file holds it
    for longer than ``wait_seconds`` (``sweep_wait_seconds`` instead while the
    holder is a sweep; by default the same), or (``"uncertain"``) when the file
    cannot be trusted. Closing the returned :class:`LockFile` releases the lock.
    """
    sweep_wait = wait_seconds if sweep_wait_seconds is None else sweep_wait_seconds
    try:
        return _attempt(path, role)  # the usual case: one attempt, no retry machinery
    except _LockFileMoved:
        pass
    except CustodyRefused as refused:
        limit = sweep_wait if refused.holder == "sweep" else wait_seconds
        if refused.reason != "held" or limit <= 0:
            raise

    import tenacity  # only a contended lock waits: not imported by an idle start

    def stop(state: tenacity.RetryCallState) -> bool:
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, _LockFileMoved):
            return state.attempt_number >= LOCK_MOVED_ATTEMPTS
        limit = sweep_wait if getattr(failure, "holder", "") == "sweep" else wait_seconds
        return state.seconds_since_start is None or state.seconds_since_start >= limit

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
        return retrying(_attempt, path, role)
    except _LockFileMoved:
        raise CustodyRefused(f"{path}: lock file keeps being replaced", "uncertain") from None


def probe_lock(path: Path) -> Literal["free", "held"] | None:
    """Whether the lock of ``path`` is free or held, without keeping it.

    ``None`` when the file is absent or cannot be probed: no evidence either way.
    The path comes from a record (an owner's lifetime lock), so it is untrusted:
    anything but a regular file is never opened, since opening a device or a
    FIFO for writing can act on it (arm a watchdog, release a waiting reader).
    """
    try:
        if not stat.S_ISREG(os.stat(path, follow_symlinks=False).st_mode):
            return None
        handle = _open_lock_file(path, create=False)
    except (OSError, CustodyRefused):
        return None
    try:
        return "free" if try_flock(handle.fd) else "held"
    except OSError:
        return None
    finally:
        handle.close()
