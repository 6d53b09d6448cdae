"""Who owns a pin or a heartbeat, and whether that owner is proven dead.

A PID alone lies: PIDs are reused, a container restart changes the PID
namespace, and machines cloned from one image share a machine-id. An
:class:`OwnerRecord` therefore carries, beside the PID:

* the host identity (hostname, machine-id, platform, PID namespace, boot id),
  the outer gate: a record from another host, platform or namespace is
  ``foreign`` and nothing here acts on it;
* the process start time (``/proc/<pid>/stat`` field 22, in clock ticks since
  boot): a live PID with a different start time is a reused PID, so the owner
  is dead;
* optionally the path of a lock file the owner holds a kernel ``flock`` on for
  its lifetime: the kernel drops the lock when the process dies, so a lock that
  can be taken proves death even across PID reuse.

:func:`owner_liveness` combines them. It answers ``dead`` only on proof; an
unreadable or missing witness answers ``unknown``, and callers keep state.

``/proc`` is only a witness when it shows this process's own PID namespace: in
a container started with ``unshare --pid`` but without a fresh ``/proc``, PIDs
read there belong to another namespace, so a missing ``/proc/<pid>`` proves
nothing. Then, and whenever the owner's own start time is unknown, only the
lifetime lock can prove death.
"""

from __future__ import annotations

import enum
import functools
import os
import sys
from pathlib import Path

import msgspec

from hostcore_file_custody.locks import probe_lock

_PROC = Path("/proc")
_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
# Process states in /proc/<pid>/stat that mean the process has exited (zombie, dead).
_EXITED_STATES = frozenset("ZXx")


class HostIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """The machine and PID namespace a process runs in.

    An empty ``pid_namespace`` means it could not be read: such an identity
    never matches, so nothing acts on its records.
    """

    hostname: str
    machine_id: str
    platform: str
    pid_namespace: str
    boot_id: str

    def same_process_space(self, other: HostIdentity) -> bool:
        """The outer gate: same host, platform and (known) PID namespace."""
        return (
            bool(self.pid_namespace)
            and self.pid_namespace == other.pid_namespace
            and self.hostname == other.hostname
            and self.machine_id == other.machine_id
            and self.platform == other.platform
        )


class OwnerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A process that owns a pin or a heartbeat, with the witnesses of its life.

    ``start_ticks`` is ``None`` where the start time could not be read; ``lock``
    is the absolute path of a lock file the owner holds while it lives, if any.
    """

    host: HostIdentity
    pid: int
    start_ticks: int | None = None
    lock: str | None = None


class Liveness(enum.StrEnum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"
    FOREIGN = "foreign"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _static_identity() -> tuple[str, str, str]:
    """Machine-id, boot id and this process's PID namespace: fixed for a process's life."""
    machine_id = next((m for m in map(_read_text, _MACHINE_ID_FILES) if m), "")
    boot_id = _read_text(_PROC / "sys" / "kernel" / "random" / "boot_id")
    try:
        namespace = os.readlink(_PROC / "self" / "ns" / "pid")
    except OSError:
        namespace = ""
    return machine_id, boot_id, namespace


def _hostname() -> str:
    """The kernel's node name, which ``gethostname()`` returns, read without importing
    ``socket``: a hook (run on every tool call) would pay for it for this one string."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # Windows has no uname

    return socket.gethostname()


@functools.lru_cache(maxsize=4)
def _host_identity(pid: int) -> HostIdentity:
    # Keyed by PID: a forked child (possibly unshared into a new namespace) reads afresh.
    machine_id, boot_id, namespace = _static_identity()
    return HostIdentity(
        hostname=_hostname(),
        machine_id=machine_id,
        platform=sys.platform,
        pid_namespace=namespace,
        boot_id=boot_id,
    )


def current_host() -> HostIdentity:
    """This process's :class:`HostIdentity`, read once per process."""
    return _host_identity(os.getpid())


def _proc_stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (after the parenthesised command name)."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return []
    _, _, tail = raw.rpartition(b")")
    return tail.decode("ascii", "replace").split()


def read_proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(command name, parent PID, start ticks)`` of a running ``pid`` from
    ``/proc/<pid>/stat``; ``None`` when it is gone, exited, or unreadable."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    head, _, tail = raw.rpartition(b")")
    command = head.partition(b"(")[2].decode("utf-8", "replace")
    fields = tail.decode("ascii", "replace").split()
    if len(fields) < 20 or fields[0] in _EXITED_STATES:
        return None
    try:
        return command, int(fields[1]), int(fields[19])
    except ValueError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or ``None`` if unreadable."""
    fields = _proc_stat_fields(pid)
    # Field 22 (starttime) is index 19 once fields 1 and 2 are cut off.
    if not fields or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


@functools.lru_cache(maxsize=4)
def _proc_is_ours(pid: int) -> bool:
    """Whether ``/proc`` shows the PID namespace of process ``pid`` (this one).

    ``/proc/self`` names the caller's PID as the mounted ``/proc`` numbers it:
    another number means ``/proc`` was mounted for another namespace.
    """
    try:
        return os.readlink(_PROC / "self") == str(pid)
    except OSError:
        return False


def proc_shows_our_namespace() -> bool:
    """Whether PIDs read in ``/proc`` are PIDs of this process's namespace."""
    return _proc_is_ours(os.getpid())


@functools.lru_cache(maxsize=4)
def _own_start_ticks(pid: int) -> int | None:
    # Keyed by PID so a forked child reads its own start time. Unknown (None)
    # when /proc shows another namespace: its /proc/<pid> is another process.
    return process_start_ticks(pid) if _proc_is_ours(pid) else None


def current_owner(lock: str | os.PathLike[str] | None = None) -> OwnerRecord:
    """The :class:`OwnerRecord` of this process, optionally naming a lifetime lock."""
    pid = os.getpid()
    return OwnerRecord(
        host=current_host(),
        pid=pid,
        start_ticks=_own_start_ticks(pid),
        lock=None if lock is None else str(lock),
    )


def _pid_witness(owner: OwnerRecord, here: HostIdentity) -> Liveness:
    """What the PID and its start time prove, on a host that passed the gate.

    Without the owner's start time, or without a ``/proc`` of our namespace,
    the PID proves nothing either way: ``unknown``.
    """
    if owner.host.boot_id and here.boot_id and owner.host.boot_id != here.boot_id:
        return Liveness.DEAD  # the machine rebooted since: every process of then is gone
    if owner.pid <= 0 or owner.start_ticks is None or not proc_shows_our_namespace():
        return Liveness.UNKNOWN
    fields = _proc_stat_fields(owner.pid)
    if fields is None:
        return Liveness.DEAD  # no process of our namespace has that PID
    if not fields or len(fields) < 20:
        return Liveness.UNKNOWN
    if fields[0] in _EXITED_STATES:
        return Liveness.DEAD
    try:
        started = int(fields[19])
    except ValueError:
        return Liveness.UNKNOWN
    return Liveness.ALIVE if started == owner.start_ticks else Liveness.DEAD


def owner_liveness(owner: OwnerRecord, *, lock_free: bool | None = None,
                   probe: bool = True) -> Liveness:
    """Whether ``owner`` is alive, proven dead, unknown, or on another host.

    ``lock_free`` is what the caller already knows about ``owner.lock`` (it took
    the lock itself: ``True``); when ``None`` and the record names a lock, the
    lock is probed unless ``probe`` is false (for readers that take no lock). A
    PID proven alive wins over a free lock (the owner released it but lives on);
    a PID proven dead, or a free lock when the PID witness is unknown, proves death.
    """
    here = current_host()
    if not here.same_process_space(owner.host):
        return Liveness.FOREIGN
    if lock_free is None and owner.lock is not None and probe:
        probed = probe_lock(Path(owner.lock))
        lock_free = None if probed is None else probed == "free"
    pid_says = _pid_witness(owner, here)
    if pid_says is not Liveness.UNKNOWN:
        return pid_says
    return Liveness.DEAD if lock_free else Liveness.UNKNOWN
