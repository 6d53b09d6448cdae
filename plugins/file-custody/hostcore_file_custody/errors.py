"""Exceptions of the file custody plugin. Each message names the path or instance at fault."""

from __future__ import annotations

import errno as errno_codes
import os

from hostcore.errors import HostcoreError


class CustodyError(HostcoreError):
    """Base class for every error this plugin raises on purpose."""


class CustodyUnavailable(CustodyError):
    """File custody cannot run on this platform (no ``fcntl``, no ``O_NOFOLLOW``: Windows)."""


class UnsafePathError(CustodyError):
    """A path is a symlink, not a regular file, or otherwise unsafe to take custody of."""


class RegistryRefused(CustodyError):
    """A registry folder custody will not act in: the message names it and the fix.

    ``reason`` is ``"symlink"`` (the root or one of its folders is a symlink),
    ``"not-a-directory"``, ``"foreign-owner"`` (owned by another user),
    ``"world-writable"`` (every user may write it) or ``"moved"`` (the root's path
    stopped naming the folder a pass held open: it stopped there).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class UnstableRevisionError(CustodyError):
    """A file changed or moved while its revision was being captured."""


class OversizedRecordError(CustodyError):
    """A record (manifest, heartbeat, pid-map entry, generation or audit record) is larger
    than custody reads: refused unread, so a hostile or runaway file cannot exhaust
    memory; whatever it names is kept, never deleted on that doubt."""

    def __init__(self, where: str, size: int, limit: int) -> None:
        super().__init__(f"{where}: {size} bytes, over the {limit}-byte cap of such records: "
                         "not read")
        self.size = size
        self.limit = limit


class FileAccessError(CustodyError):
    """The operating system refused an operation on a file: permission denied, no space
    left, an I/O error. ``errno`` is the OS error number; nothing was changed."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno


def os_reason(exc: OSError) -> str:
    """A short, path-free description of an OS error: ``"Permission denied (EACCES)"``."""
    code = exc.errno or errno_codes.EIO
    return f"{os.strerror(code)} ({errno_codes.errorcode.get(code, str(code))})"


def access_error(where: str, exc: OSError) -> FileAccessError:
    """The :class:`FileAccessError` for ``exc`` met while acting on ``where``."""
    return FileAccessError(f"{where}: {os_reason(exc)}", exc.errno or errno_codes.EIO)


class CustodyRefused(CustodyError):
    """Generation custody of an instance is held by a live or uncertain competing owner.

    ``reason`` is ``"held"`` (another owner holds the instance's lock),
    ``"uncertain"`` (the lock file cannot be trusted or locked) or ``"closed"``
    (the session whose custody was to be reused has ended, or belongs to the
    parent of this forked process). ``holder`` says who holds a ``"held"`` lock
    when the lock file tells: ``"session"``, ``"sweep"``, ``"writer"``,
    ``"recovery"``, else ``"unknown"``.
    """

    def __init__(self, message: str, reason: str, holder: str = "unknown") -> None:
        super().__init__(message)
        self.reason = reason
        self.holder = holder


class WitnessError(CustodyError):
    """A writer's generation witness is missing or no longer current.

    ``reason`` is ``"missing"`` (no witness: materialise or repair first),
    ``"stale"`` (another generation is current), ``"ended"`` (the generation is
    terminal or archived) or ``"unrecorded"`` (no generation record exists).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class AgentUnresolved(CustodyError):
    """The agent process a hook runs for cannot be identified, so no agent-owned session
    is started for it. ``reason`` is ``"namespace"`` (``/proc`` shows another PID
    namespace), ``"gone"`` (a process of the walk exited or cannot be read),
    ``"orphaned"`` (the walk reached PID 1) or ``"too-deep"`` (only shells and runners
    within the walk's bound)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class AgentEventRefused(CustodyError):
    """File custody could not act on an agent's hook event. The message names the event
    and ``reason`` (a :class:`CustodyError`'s reason, an OS error's code, or the error's
    type) and nothing else: it reaches the hook's log, where no session id or path may."""

    def __init__(self, event: str, reason: str) -> None:
        super().__init__(f"file custody could not act on {event}: {reason}")
        self.reason = reason
