"""The heartbeat registry of embedding agents: one folder, a few files per session.

Layout under the registry root::

    heartbeats/<instance>.json     heartbeat cache (disposable): generation, owner, refresh
    pid-map/<pid>.json             which instance a process runs (disposable)
    prompt-hash/<instance>.txt     the session's prompt hash (disposable)
    generations/<instance>.json    the instance's current generation and its status
    locks/<instance>.lock          the instance's custody lock (see custody.py)
    audit/<id>.json                sweep observations and unrecorded-sweep diagnostics
    */.custody/                    private pins and manifests of deletions in flight

A session start takes exactly one lock, the instance's custody lock, and keeps
it until the session closes: the kernel drops it if the process dies, which is
how a sweep proves the session dead. It then writes the generation record (for
a new generation), the heartbeat, the pid-map entry and the prompt hash, each
by atomic rename, and only then lets its other calls reuse the custody.

A start fsyncs nothing, except when it replaces a generation still recorded
``live`` (a crashed session's): that record is fsynced, so a power cut cannot
bring the replaced generation back as the live one. Everything else a start
writes names a session that a power cut kills (the boot id changes, proving
every owner of before the cut dead), so losing it loses nothing: the caches are
disposable and a lost new generation record only turns that session's audits
into ``missing`` diagnostics. Nor does a start create folders: the registry's
are made once per :class:`HeartbeatRegistry` object, again only if one vanished.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from hostcore.errors import RecordError
from hostcore.records import decode_json, encode_json
from hostcore_file_custody.custody import Custody, LifetimeCustody, hold_custody
from hostcore_file_custody.errors import (
    CustodyError,
    CustodyRefused,
    OversizedRecordError,
    WitnessError,
)
from hostcore_file_custody.fsio import DIR_MODE, publish, read_capped
from hostcore_file_custody.limits import MAX_RECORD_BYTES
from hostcore_file_custody.owner import OwnerRecord, current_owner
from hostcore_file_custody.support import require_custody

# How long a session start waits for an instance held by another writer or a
# closing session before it is refused.
START_WAIT_SECONDS = 2.0
# How long a start waits while a sweep holds the instance: a sweep holds it for
# one step on that instance (milliseconds), so only a stuck sweep reaches this.
SWEEP_WAIT_SECONDS = 60.0

_T = TypeVar("_T")
GenerationStatus = Literal["live", "terminal", "archived"]
OwnerKind = Literal["process", "agent"]
# The newest heartbeat record version this code writes and judges.
HEARTBEAT_VERSION = 2
_GENERATION_ID = re.compile(r"^gen_[A-Za-z0-9_-]{1,64}$")
_INSTANCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def new_generation_id() -> str:
    return f"gen_{os.urandom(16).hex()}"


def is_generation_id(value: object) -> bool:
    return isinstance(value, str) and _GENERATION_ID.match(value) is not None


def check_instance(instance: str) -> str:
    if not isinstance(instance, str) or not _INSTANCE.match(instance):
        raise CustodyError(f"instance {instance!r}: use letters, digits, '-' and '_' "
                           "(up to 128, not starting with '-' or '_')")
    return instance


class GenerationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The current generation of an instance; ``epoch`` grows with every transition."""

    instance: str
    generation_id: str
    status: GenerationStatus
    epoch: int
    changed_at: float


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    """A session's heartbeat cache. ``payload`` is what the live-coordination writer projects.

    ``version`` 1 (the field absent: every record written before agent-owned sessions)
    is a process-owned session's. Version 2 adds ``owner_kind`` (``"agent"``: the owner
    is the agent process a hook ran for, holding no lock; see :mod:`.agent_sessions`)
    and ``ended_at`` (when its end wrote the terminal generation record). Records of a
    version above :data:`HEARTBEAT_VERSION` are kept by the sweep, never judged.
    """

    instance: str
    generation_id: str
    owner: OwnerRecord
    seq: int = 0
    refreshed_at: float = 0.0
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    version: int = 1
    owner_kind: OwnerKind = "process"
    ended_at: float | None = None


class PidMapEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Which instance process ``pid`` runs."""

    pid: int
    instance: str
    generation_id: str | None = None


class HeartbeatRegistry:
    """The files of every session instance under one root folder."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Absolute, so lock paths recorded in owner records compare equal across callers.
        self.root = Path(os.path.abspath(root))
        self.heartbeats_dir = self.root / "heartbeats"
        self.pid_map_dir = self.root / "pid-map"
        self.prompt_hash_dir = self.root / "prompt-hash"
        self.generations_dir = self.root / "generations"
        self.locks_dir = self.root / "locks"
        self.audit_dir = self.root / "audit"
        self.last_sweep_path = self.root / "last-sweep.json"
        self._ensured = False

    def __repr__(self) -> str:
        return f"HeartbeatRegistry({str(self.root)!r})"

    @property
    def cache_dirs(self) -> dict[str, Path]:
        """The folders of disposable caches, each with its own private custody folder."""
        return {"heartbeats": self.heartbeats_dir, "pid-map": self.pid_map_dir,
                "prompt-hash": self.prompt_hash_dir}

    def ensure(self) -> HeartbeatRegistry:
        """Create the registry's folders (owner-only) where missing."""
        # The root first, so it is owner-only too whatever the umask: a sweep refuses
        # a world-writable one (see anchor.py).
        for folder in (self.root, *self.cache_dirs.values(), self.generations_dir,
                       self.locks_dir, self.audit_dir):
            folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        self._ensured = True
        return self

    def _publish(self, path: Path, data: bytes, *, durable: bool) -> None:
        """Atomic replace of ``path``; its folder is made again only if it vanished."""
        try:
            publish(path, data, durable=durable)
        except FileNotFoundError:
            self.ensure()
            publish(path, data, durable=durable)

    # -- paths ---------------------------------------------------------------------

    def heartbeat_path(self, instance: str) -> Path:
        return self.heartbeats_dir / f"{check_instance(instance)}.json"

    def pid_map_path(self, pid: int) -> Path:
        return self.pid_map_dir / f"{int(pid)}.json"

    def prompt_hash_path(self, instance: str) -> Path:
        return self.prompt_hash_dir / f"{check_instance(instance)}.txt"

    def generation_path(self, instance: str) -> Path:
        return self.generations_dir / f"{check_instance(instance)}.json"

    def lock_path(self, instance: str) -> Path:
        return self.locks_dir / f"{check_instance(instance)}.lock"

    # -- records -------------------------------------------------------------------

    def read_generation(self, instance: str) -> GenerationRecord | None:
        """The generation record, ``None`` if absent; :class:`RecordError` if malformed."""
        return _read(self.generation_path(instance), GenerationRecord)

    def write_generation(self, record: GenerationRecord, *, durable: bool = True) -> None:
        """Write the generation record, fsynced unless ``durable`` is false (see the
        module docstring for the one write that may skip it)."""
        # Not disposable: the record is the authority audits are checked against.
        self._publish(self.generation_path(record.instance), encode_json(record),
                      durable=durable)

    def read_heartbeat(self, instance: str) -> Heartbeat | None:
        return _read(self.heartbeat_path(instance), Heartbeat)

    def write_heartbeat(self, heartbeat: Heartbeat) -> None:
        # A disposable cache: atomic for every reader, not fsynced.
        self._publish(self.heartbeat_path(heartbeat.instance), encode_json(heartbeat),
                      durable=False)

    def heartbeat_present(self, instance: str) -> bool:
        """Whether anything lives at the instance's heartbeat path now."""
        return os.path.lexists(self.heartbeat_path(instance))

    def read_pid_map(self, pid: int) -> PidMapEntry | None:
        return _read(self.pid_map_path(pid), PidMapEntry)

    def write_pid_map(self, entry: PidMapEntry) -> None:
        self._publish(self.pid_map_path(entry.pid), encode_json(entry), durable=False)

    def write_prompt_hash(self, instance: str, value: str) -> None:
        self._publish(self.prompt_hash_path(instance), value.encode(), durable=False)

    # -- custody -------------------------------------------------------------------

    def with_generation_custody(self, instance: str, *,
                                wait_seconds: float = 0.0) -> contextlib.AbstractContextManager[
                                    Custody]:
        """Serialise every change to ``instance``'s files (see :mod:`.custody`)."""
        require_custody()
        return hold_custody(self.lock_path(instance), instance, wait_seconds=wait_seconds)

    def custody_for_sweep(self, instance: str) -> contextlib.AbstractContextManager[Custody]:
        """Custody for a sweep: never reuses custody held in this process, and marks
        the lock file as a sweep's, so a session start waits for it instead of failing."""
        require_custody()
        return hold_custody(self.lock_path(instance), instance, reuse=False, role="sweep")

    # -- sessions ------------------------------------------------------------------

    def start_session(
        self,
        instance: str | None = None,
        *,
        continue_generation: str | None = None,
        prompt_hash: str = "",
        payload: dict[str, Any] | None = None,
        wait_seconds: float = START_WAIT_SECONDS,
        sweep_wait_seconds: float = SWEEP_WAIT_SECONDS,
    ) -> Session:
        """Start (or resume) a session of ``instance`` (a new instance when ``None``).

        Takes one lock, the instance's custody lock, held until :meth:`Session.close`.
        ``continue_generation`` resumes that generation if it is still the live
        current one; otherwise a new generation replaces it. While a sweep holds
        the instance (for its step on that one instance) the start waits for it,
        up to ``sweep_wait_seconds``; another holder is waited on for
        ``wait_seconds``. Raises
        :class:`~hostcore_file_custody.errors.CustodyRefused` when another live
        session (or an uncertain owner) holds the instance; its message names a
        sweep when a sweep holds it.
        """
        require_custody()
        instance = check_instance(instance or f"ses_{os.urandom(12).hex()}")
        if not self._ensured:
            self.ensure()
        lifetime = LifetimeCustody(self.lock_path(instance), wait_seconds=wait_seconds,
                                   sweep_wait_seconds=sweep_wait_seconds)
        try:
            owner = current_owner(lock=lifetime.lock_path)
            record = self.read_generation(instance)
            if (continue_generation is not None and record is not None
                    and record.generation_id == continue_generation and record.status == "live"):
                generation_id = continue_generation
            else:
                generation_id = new_generation_id()
                self.write_generation(GenerationRecord(
                    instance=instance, generation_id=generation_id, status="live",
                    epoch=(record.epoch + 1) if record else 1, changed_at=time.time()),
                    durable=record is not None and record.status == "live")
            self.write_heartbeat(Heartbeat(instance=instance, generation_id=generation_id,
                                           owner=owner, refreshed_at=time.time(),
                                           payload=payload or {}))
            self.write_pid_map(PidMapEntry(pid=owner.pid, instance=instance,
                                           generation_id=generation_id))
            self.write_prompt_hash(instance, prompt_hash)
        except BaseException:
            lifetime.release()
            raise
        lifetime.publish()
        return Session(self, instance, generation_id, owner, lifetime)


def _read(path: Path, type_: type[_T]) -> _T | None:
    """The record at ``path``, ``None`` if absent; :class:`RecordError` when it is
    malformed, a symlink or over :data:`MAX_RECORD_BYTES` (refused unread)."""
    try:
        data = read_capped(path, MAX_RECORD_BYTES)
    except OversizedRecordError as exc:
        raise RecordError(str(exc)) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise RecordError(f"{path}: is a symlink; custody never follows one") from None
    if data is None:
        return None
    return decode_json(data, type_, what=str(path))


class Session:
    """A live session instance: holds its custody and its generation witness.

    Every method runs under the instance's custody, reusing the lock taken at
    start (an in-process mutex keeps this process's threads in turn).
    """

    def __init__(self, registry: HeartbeatRegistry, instance: str, generation_id: str,
                 owner: OwnerRecord, lifetime: LifetimeCustody) -> None:
        self.registry = registry
        self.instance = instance
        self.generation_id: str | None = generation_id
        self.owner = owner
        self._lifetime = lifetime
        self.closed = False
        # A forked child inherits this object but not the custody: it must not act.
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"Session({self.instance!r}, {self.generation_id!r})"

    def custody(self) -> contextlib.AbstractContextManager[Custody]:
        """The instance's custody, reusing the session's lock; refused once closed and
        in a forked child (the session is its parent's)."""
        if self.closed:
            raise CustodyRefused(f"{self.instance}: the session has ended", "closed")
        if os.getpid() != self._pid:
            raise CustodyRefused(f"{self.instance}: the session belongs to the parent of "
                                 "this forked process", "closed")
        return self.registry.with_generation_custody(self.instance)

    def refresh(self, payload: dict[str, Any] | None = None) -> Heartbeat:
        """Publish a refreshed heartbeat for the witnessed generation."""
        from hostcore_file_custody.writers import HeartbeatWriter

        def mutate(current: Heartbeat | None) -> Heartbeat:
            base = current or Heartbeat(instance=self.instance,
                                        generation_id=self.generation_id or "",
                                        owner=self.owner)
            return msgspec.structs.replace(
                base, owner=self.owner, seq=base.seq + 1, refreshed_at=time.time(),
                payload=base.payload if payload is None else payload)

        with self.custody():
            return HeartbeatWriter(self.registry).publish(self.instance, self.generation_id,
                                                          mutate)

    def publish_projection(self, project: Callable[[Heartbeat | None], Heartbeat]) -> Heartbeat:
        """Publish what ``project`` makes of the current heartbeat (live-coordination writer)."""
        from hostcore_file_custody.writers import LiveCoordinationWriter

        with self.custody():
            return LiveCoordinationWriter(self.registry).publish(
                self.instance, self.generation_id, project)

    def replace_generation(self) -> str:
        """Start a new generation of this instance; the old one is replaced."""
        with self.custody():
            record = self.registry.read_generation(self.instance)
            generation_id = new_generation_id()
            self.registry.write_generation(GenerationRecord(
                instance=self.instance, generation_id=generation_id, status="live",
                epoch=(record.epoch + 1) if record else 1, changed_at=time.time()))
            self.generation_id = generation_id
            self.registry.write_heartbeat(Heartbeat(
                instance=self.instance, generation_id=generation_id, owner=self.owner,
                refreshed_at=time.time()))
            return generation_id

    def end_generation(self, status: Literal["terminal", "archived"] = "terminal") -> None:
        """Mark the current generation ended; its caches stay until swept or removed."""
        with self.custody():
            record = self.registry.read_generation(self.instance)
            if record is None:
                raise WitnessError(f"{self.registry.generation_path(self.instance)}: no "
                                   "generation to end", "unrecorded")
            self.registry.write_generation(msgspec.structs.replace(
                record, status=status, epoch=record.epoch + 1, changed_at=time.time()))

    def repair(self) -> str:
        """Re-establish a generation witness and materialise its heartbeat.

        Keeps the recorded generation if it is live, else starts a new one.
        Returns the witness, which later publications need.
        """
        with self.custody():
            try:
                record = self.registry.read_generation(self.instance)
            except RecordError:
                record = None
            if record is None or record.status != "live":
                generation_id = new_generation_id()
                self.registry.write_generation(GenerationRecord(
                    instance=self.instance, generation_id=generation_id, status="live",
                    epoch=(record.epoch + 1) if record else 1, changed_at=time.time()))
            else:
                generation_id = record.generation_id
            self.generation_id = generation_id
            self.registry.write_heartbeat(Heartbeat(
                instance=self.instance, generation_id=generation_id, owner=self.owner,
                refreshed_at=time.time()))
            return generation_id

    def heal_pid_map(self) -> bool:
        """Republish this process's pid-map entry if it is missing or names another
        instance (that instance's process had this PID before: it is gone). Returns
        whether it wrote."""
        with self.custody():
            try:
                entry = self.registry.read_pid_map(self.owner.pid)
            except RecordError:
                entry = None
            if entry is not None and entry.instance == self.instance:
                return False
            self.registry.write_pid_map(PidMapEntry(pid=self.owner.pid, instance=self.instance,
                                                    generation_id=self.generation_id))
            return True

    def set_prompt_hash(self, value: str) -> None:
        with self.custody():
            self.registry.write_prompt_hash(self.instance, value)

    def close(self, *, end_generation: bool = True, remove_files: bool = True) -> None:
        """End the session: optionally mark its generation terminal and remove its
        caches, then release its custody. In a forked child it only marks this copy
        closed: the session, its files and its lock are the parent's."""
        if self.closed:
            return
        if os.getpid() != self._pid:
            self.closed = True
            return
        with self._lifetime.closing():
            self.closed = True
            if end_generation and self.generation_id is not None:
                with contextlib.suppress(RecordError):
                    record = self.registry.read_generation(self.instance)
                    if record is not None and record.generation_id == self.generation_id:
                        self.registry.write_generation(msgspec.structs.replace(
                            record, status="terminal", epoch=record.epoch + 1,
                            changed_at=time.time()))
            if remove_files:
                self._remove_own_files()
                self._lifetime.discard_lock_file()

    def _remove_own_files(self) -> None:
        # This process holds the instance's custody: nobody else publishes these files.
        paths = [self.registry.heartbeat_path(self.instance),
                 self.registry.prompt_hash_path(self.instance)]
        with contextlib.suppress(RecordError):
            entry = self.registry.read_pid_map(self.owner.pid)
            if entry is not None and entry.instance == self.instance:
                paths.append(self.registry.pid_map_path(self.owner.pid))
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@contextlib.contextmanager
def with_generation_custody(registry: HeartbeatRegistry, instance: str, *,
                            wait_seconds: float = 0.0) -> Iterator[Custody]:
    """Module-level spelling of :meth:`HeartbeatRegistry.with_generation_custody`."""
    with registry.with_generation_custody(instance, wait_seconds=wait_seconds) as custody:
        yield custody
