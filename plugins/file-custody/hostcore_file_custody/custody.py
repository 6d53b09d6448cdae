"""Generation custody: one owner at a time acts on an instance's files.

Custody of an instance is the kernel ``flock`` on its lock file
(``locks/<instance>.lock``). A live session holds it for its whole life, so
its own writes reuse it and cost no further kernel lock; a sweep or a
standalone writer takes it only for the span of its work. The lock is a
no-clobber lease: a competing owner that holds it is refused whatever its age,
because only the holder's death (or release) frees it.

Within one process, custody is reentrant per thread: a nested call reuses the
custody its thread already holds (``nested=True``), so a publication inside a
nested call still has to recheck its captured generation. Other threads
wait for a session's custody (an in-process mutex, counted like a lock) but are
refused a sweep's or a standalone writer's. Unrelated instances have unrelated
lock files and never wait on each other.

Custody does not survive ``fork``: the child's copies of the lock descriptors
are closed as it starts (see :mod:`.locks`), every custody it inherited is
marked closed, so it can neither keep a dead parent's instance locked nor act
through its parent's custody.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from hostcore_file_custody.errors import CustodyRefused
from hostcore_file_custody.locks import (
    LOCK_RETRY_PAUSE_SECONDS,
    LOCKS,
    LockFile,
    Role,
    lock_exclusive,
)

# How long another thread of a session's process waits for the session's custody.
SESSION_MUTEX_WAIT_SECONDS = 5.0


class _Held:
    """Custody this process holds on one lock file."""

    def __init__(self, lock_path: Path, lock: LockFile, *, lifetime: bool) -> None:
        self.lock_path = lock_path
        self.lock = lock
        self.lifetime = lifetime
        self.mutex = threading.Lock()
        self.owner_thread: int | None = None
        self.depth = 0
        self.closed = False
        self.discard_when: Callable[[], bool] | None = None
        self.discarded = False
        _EVERY_HELD.add(self)

    @property
    def fd(self) -> int:
        return self.lock.fd


# Custody held by this process, keyed by lock file path. Entries are added only
# after the kernel lock is taken and removed before it is released, so a
# thread that finds no entry competes through the kernel lock.
_HELD: dict[str, _Held] = {}
# Every custody object alive in this process, so a forked child can mark them closed.
_EVERY_HELD: weakref.WeakSet[_Held] = weakref.WeakSet()


def _forget_custody_in_child() -> None:
    # The lock descriptors themselves are closed by locks.py's fork handler.
    for held in list(_EVERY_HELD):
        held.closed = True
        held.mutex = threading.Lock()  # another thread may have held it at the fork
        held.owner_thread, held.depth = None, 0
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_custody_in_child)


class Custody:
    """A handle on held custody.

    ``nested`` is true when this call reused custody its thread already held;
    ``lifetime`` when the custody is a live session's.
    """

    # A plain class, not a dataclass: dataclasses imports inspect, which an agent
    # would wait for at every session start (the hook's lean handler).
    __slots__ = ("_held", "instance", "lifetime", "lock_path", "nested")

    def __init__(self, instance: str, lock_path: Path, *, nested: bool, lifetime: bool,
                 _held: _Held) -> None:
        self.instance = instance
        self.lock_path = lock_path
        self.nested = nested
        self.lifetime = lifetime
        self._held = _held

    def __repr__(self) -> str:
        return (f"Custody(instance={self.instance!r}, nested={self.nested!r}, "
                f"lifetime={self.lifetime!r})")

    def discard_lock_file_if(self, condition: Callable[[], bool]) -> None:
        """On release, unlink the lock file if ``condition()`` still holds then.

        Only for custody taken by a sweep: the instance has nothing left to guard.
        """
        if not self._held.lifetime:
            self._held.discard_when = condition

    @property
    def lock_file_discarded(self) -> bool:
        """Whether the release unlinked the lock file (read after the block ends)."""
        return self._held.discarded


def _key(lock_path: Path) -> str:
    return os.path.abspath(lock_path)


@contextlib.contextmanager
def hold_custody(lock_path: Path, instance: str, *, wait_seconds: float = 0.0,
                 reuse: bool = True, role: Role = "writer") -> Iterator[Custody]:
    """Hold custody of ``instance`` (whose lock file is ``lock_path``) for the block.

    ``reuse=False`` never reuses custody held in this process (a sweep must not
    act through a live session's custody). ``role`` is written into the lock file
    for competing lockers to read. Raises :class:`CustodyRefused` when a live or
    uncertain competing owner holds it past ``wait_seconds``.
    """
    key = _key(lock_path)
    me = threading.get_ident()
    held = _HELD.get(key)
    if held is not None and reuse and held.owner_thread == me:
        held.depth += 1
        try:
            yield Custody(instance, lock_path, nested=True, lifetime=held.lifetime, _held=held)
        finally:
            held.depth -= 1
        return
    if held is not None and reuse and held.lifetime:
        with _session_custody(held, instance) as custody:
            yield custody
        return
    lock = _take(lock_path, key, wait_seconds, role)
    held = _Held(lock_path, lock, lifetime=False)
    held.mutex.acquire()  # a fresh mutex nobody else can see yet: uncontended
    held.owner_thread, held.depth = me, 1
    _HELD[key] = held
    try:
        yield Custody(instance, lock_path, nested=False, lifetime=False, _held=held)
    finally:
        if not held.closed:  # closed already: this is a forked child, holding nothing
            _HELD.pop(key, None)
            if held.discard_when is not None and held.discard_when():
                held.discarded = _unlink_if_ours(lock_path, lock.fd)
            held.closed = True
        lock.close()  # releases the kernel lock


def _take(lock_path: Path, key: str, wait_seconds: float, role: Role) -> LockFile:
    def attempt() -> LockFile:
        if key in _HELD:
            raise CustodyRefused(f"{lock_path}: custody held by another thread of this "
                                 "process", "held")
        return lock_exclusive(lock_path, role=role)

    try:
        return attempt()  # the usual case: free at once, no retry machinery imported
    except CustodyRefused as refused:
        if wait_seconds <= 0 or refused.reason != "held":
            raise
    import tenacity  # only a caller left waiting retries: not imported otherwise

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(
            lambda exc: isinstance(exc, CustodyRefused) and exc.reason == "held"),
        stop=tenacity.stop_after_delay(wait_seconds),
        wait=tenacity.wait_fixed(LOCK_RETRY_PAUSE_SECONDS),
        reraise=True,
    )
    return retrying(attempt)


@contextlib.contextmanager
def _session_custody(held: _Held, instance: str) -> Iterator[Custody]:
    LOCKS.add()
    if not held.mutex.acquire(timeout=SESSION_MUTEX_WAIT_SECONDS):
        raise CustodyRefused(f"{held.lock_path}: another thread kept the session's custody",
                             "held")
    try:
        if held.closed:
            raise CustodyRefused(f"{held.lock_path}: the session has ended", "closed")
        held.owner_thread, held.depth = threading.get_ident(), 1
        yield Custody(instance, held.lock_path, nested=False, lifetime=True, _held=held)
    finally:
        held.owner_thread, held.depth = None, 0
        held.mutex.release()


def _unlink_if_ours(lock_path: Path, fd: int) -> bool:
    """Unlink the lock file while holding its lock, if its name still leads to our inode;
    whether it did."""
    with contextlib.suppress(FileNotFoundError):
        named = os.stat(lock_path, follow_symlinks=False)
        mine = os.fstat(fd)
        if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(lock_path)
            return True
    return False


class LifetimeCustody:
    """The custody a live session holds from its start to its close."""

    def __init__(self, lock_path: Path, *, wait_seconds: float,
                 sweep_wait_seconds: float) -> None:
        self.lock_path = lock_path
        lock = lock_exclusive(lock_path, role="session", wait_seconds=wait_seconds,
                              sweep_wait_seconds=sweep_wait_seconds)
        self._held = _Held(lock_path, lock, lifetime=True)

    def publish(self) -> None:
        """Let this process's other calls reuse the custody (after the session's first writes)."""
        _HELD[_key(self.lock_path)] = self._held

    @contextlib.contextmanager
    def closing(self) -> Iterator[None]:
        """Hold the session's custody one last time, then release it for good.

        Closing from inside the session's own custody (same thread) reuses it.
        """
        if self._held.owner_thread == threading.get_ident():
            try:
                yield
            finally:
                self.release()
            return
        LOCKS.add()
        if not self._held.mutex.acquire(timeout=SESSION_MUTEX_WAIT_SECONDS):
            raise CustodyRefused(f"{self.lock_path}: another thread kept the session's custody",
                                 "held")
        try:
            self._held.owner_thread, self._held.depth = threading.get_ident(), 1
            yield
        finally:
            self.release()
            self._held.mutex.release()

    def discard_lock_file(self) -> None:
        """Unlink the lock file while still holding it (the session leaves nothing to guard)."""
        if not self._held.closed:
            _unlink_if_ours(self.lock_path, self._held.fd)

    def release(self) -> None:
        """Give the custody up: the kernel lock is dropped, the lock file kept."""
        if self._held.closed:
            return
        self._held.closed = True
        _HELD.pop(_key(self.lock_path), None)
        self._held.lock.close()
