"""State files: atomic writes, owner-only folders, and the one cross-process lock.

Every state write in hostcore goes through :func:`atomic_write`: a reader sees
either the old file or the new one, never a torn write, and after it returns
the new content survives a power cut (the data and the directory entry are both
fsynced). Folders are created ``0700`` and files ``0600`` whatever the umask,
because the state root holds evidence of what people worked on.

:func:`file_lock` is the only way hostcore serialises work across processes: a
kernel ``flock`` on a lock file, dropped by the kernel when the holder dies, so
a killed process never leaves a lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from hostcore.errors import HostcoreError

log = logging.getLogger("hostcore.files")
T = TypeVar("T")

STATE_FILE_MODE = 0o600
STATE_DIR_MODE = 0o700
# How often a bounded wait for a lock tries again (seconds).
LOCK_POLL_SECONDS = 0.05

__all__ = [
    "STATE_DIR_MODE",
    "STATE_FILE_MODE",
    "LockBusy",
    "atomic_write",
    "ensure_dir",
    "file_lock",
    "fsync_dir",
    "keep_report",
    "open_state_file",
    "read_report",
    "remove_stale_temps",
]


class LockBusy(HostcoreError):
    """Another process holds a lock and did not release it within the wait allowed.

    ``holder`` is what the holder wrote into the lock file (its pid and command),
    or ``""`` when it wrote nothing.
    """

    def __init__(self, path: Path, holder: str, waited: float) -> None:
        self.path = path
        self.holder = holder
        self.waited = waited
        who = f"held by {holder}" if holder else "held by another process"
        super().__init__(f"{path} is {who}; gave up after {waited:g} s")

    def __reduce__(self) -> tuple[type[LockBusy], tuple[Path, str, float]]:
        return (type(self), (self.path, self.holder, self.waited))


def ensure_dir(path: Path, mode: int = STATE_DIR_MODE) -> Path:
    """Create ``path`` (and missing parents) with ``mode`` exactly, whatever the umask.

    Folders that already exist keep their mode: the root check in
    :mod:`hostcore.host` refuses a root others can write to.
    """
    path = Path(path)
    if path.is_dir():
        return path
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=mode)
            os.chmod(folder, mode)  # mkdir's mode is masked by the umask
    return path


def open_state_file(path: Path, flags: int, mode: int = STATE_FILE_MODE) -> int:
    """``os.open`` for a state file: never follows a symlink, never leaks into a child.

    A symlink planted at ``path`` raises ``OSError`` (``ELOOP``) instead of
    redirecting a write elsewhere. A created file gets ``mode`` whatever the umask.
    """
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    if flags & os.O_CREAT:
        try:
            if os.fstat(fd).st_mode & 0o777 != mode and os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            raise
    return fd


def atomic_write(
    path: Path, data: bytes, mode: int = STATE_FILE_MODE, *, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, fsync dir.

    ``durable=False`` skips both fsyncs: the replacement stays atomic for every
    reader and survives the writer's death, but not a power cut. Only for files
    that are disposable or whose protocol covers process death alone, where two
    fsyncs per write would dominate.

    The temp file is ``.<name>.<pid>.<random>.tmp`` beside ``path``: a writer
    killed mid-write leaves it behind, and :func:`remove_stale_temps` knows it
    by the dead pid. An ``OSError`` that names no file (a full disk) is raised
    again naming ``path``.
    """
    path = Path(path)
    try:
        _replace(path, data, mode, durable)
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def _replace(path: Path, data: bytes, mode: int, durable: bool) -> None:
    ensure_dir(path.parent)
    fd, tmp_name = _new_temp(path)
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


def _new_temp(path: Path) -> tuple[int, str]:
    """A new, exclusive ``.<name>.<pid>.<random>.tmp`` beside ``path``, open for writing.

    Made here rather than with :mod:`tempfile`, whose import costs a cold start
    more than every state write of a tick (``benchmarks/startup.py``).
    """
    while True:
        name = str(path.parent / f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            return open_state_file(Path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL), name
        except FileExistsError:
            continue  # 48 random bits met another file: draw again


def remove_stale_temps(root: Path) -> int:
    """Delete the temp files :func:`atomic_write` calls killed under ``root`` left
    behind (their pid is no longer running); returns how many. Never follows a
    symlink; a temp file of a live writer, or of another user, is left alone."""
    removed = 0
    folders = [str(root)]
    me = os.geteuid()
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                found = list(entries)
        except OSError:
            continue
        for entry in found:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif _stale_temp(entry.name):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == me:
                        os.unlink(entry.path)
                        removed += 1
    return removed


def _stale_temp(name: str) -> bool:
    """Whether ``name`` is an :func:`atomic_write` temp file of a process now gone."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    parts = name.rsplit(".", 3)  # ".<name>", "<pid>", "<random>", "tmp"
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive under another user, or not a pid at all
    return False


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float | None = None, holder: str = "") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created ``0600``) for the block.

    ``timeout=None`` waits as long as it takes; otherwise :class:`LockBusy` is
    raised after ``timeout`` seconds, naming what the holder wrote. ``holder``
    (say ``"pid 4242 (hostcore run)"``) is in the file while held so the next
    process can say who it waits for: written once the lock is held, unless the
    file already holds exactly that (the same holder's previous hold, as each
    step of a tick finds it). The descriptor is close-on-exec, so a child
    process never inherits the lock.
    """
    path = Path(path)
    ensure_dir(path.parent)
    fd = open_state_file(path, os.O_RDWR | os.O_CREAT)
    try:
        _acquire(fd, path, timeout)
        if holder:
            _write_holder(fd, holder.encode())
        yield
    finally:
        os.close(fd)  # closing the last descriptor drops the flock


def _acquire(fd: int, path: Path, timeout: float | None) -> None:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return  # free: the common case pays for no retry machinery
    except BlockingIOError:
        pass
    # Imported here: only a contended lock retries, and a cold start must not
    # import tenacity (benchmarks/startup.py).
    import tenacity

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(LOCK_POLL_SECONDS),
        retry=tenacity.retry_if_exception_type(BlockingIOError),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LockBusy(path, _holder_of(fd), timeout) from None


def _write_holder(fd: int, holder: bytes) -> None:
    """Make ``holder`` the whole content of the held lock file ``fd``.

    Read first (one byte more, to tell a longer file): truncating and writing the
    same line again changes the inode (a journal write, about 0.9 ms of a step's
    wall clock), and a tick takes the lock six times over for the same holder.
    """
    if os.pread(fd, len(holder) + 1, 0) != holder:
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder, 0)


def _holder_of(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def keep_report(path: Path, report: Any, what: str) -> None:
    """Keep ``report`` (anything msgspec encodes) at ``path`` for another process to
    show: atomic, but never fsynced (a report is disposable), and not written at
    all when the file holds those bytes already (a quiet tick's poll summaries
    are the last one's: a read costs less than a temp file and a rename). A write
    that fails is logged, by kind, and never raised: reporting must not fail the
    work it reports on (a full disk, say). ``what`` names it in the log line."""
    data = msgspec.json.encode(report)
    try:
        if not _holds(path, data):
            atomic_write(path, data, durable=False)
    except OSError as exc:
        log.warning("could not keep %s: %s", what, type(exc).__name__)


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at ``path`` (not a symlink) is exactly ``data``."""
    try:
        fd = open_state_file(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def read_report(path: Path, type_: type[T]) -> T | None:
    """The report :func:`keep_report` kept at ``path``; ``None`` when there is none
    or it cannot be read or decoded."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=type_)
    except (OSError, msgspec.DecodeError):
        return None
