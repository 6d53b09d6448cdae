"""The sweep's audit: a provisional observation fenced by the observed generation.

:func:`record_live_sweep_observation` attaches a ``sweep_observed`` record to the
generation the caller captured from the state it observed, never to whichever
generation happens to be current when it runs. It checks that authority three
times: before taking custody, right after taking it, and immediately before
writing (a nested call in the same thread can replace the generation while
custody is reused). The observation is provisional: it never ends a session.

When the observation cannot be attached (no witness, no generation record, an
ended or replaced generation, a failed write), the sweep leaves a
``heartbeat_sweep_unrecorded`` diagnostic instead with
:func:`record_sweep_unrecorded`.

Records are lists in files under ``audit/`` (see :class:`AuditJournal`);
telemetry carries only counts, booleans and the reason enum.
"""

from __future__ import annotations

import contextlib
import os
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from hostcore.errors import RecordError
from hostcore.records import decode_json, encode_json
from hostcore_file_custody.errors import OversizedRecordError
from hostcore_file_custody.fsio import publish, read_capped
from hostcore_file_custody.hooks import NO_HOOKS, SweepHooks
from hostcore_file_custody.limits import MAX_AUDIT_FILE_BYTES
from hostcore_file_custody.registry import HeartbeatRegistry, is_generation_id
from hostcore_file_custody.revision import FileRevision

UnrecordedReason = Literal["unwitnessed", "missing", "terminal", "archived", "stale",
                           "write-failed"]
UNRECORDED_REASONS: tuple[str, ...] = typing.get_args(UnrecordedReason)

Emit = Callable[..., Any]


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An observation or a diagnostic about a swept heartbeat (``record_id`` is unique)."""

    kind: Literal["sweep_observed", "heartbeat_sweep_unrecorded"]
    record_id: str
    instance: str
    generation_id: str | None
    observed: FileRevision
    recorded_at: float
    provisional: bool = True
    epoch: int | None = None
    reason: str | None = None


class AuditOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the observation was recorded; if not, why (one of :data:`UNRECORDED_REASONS`)."""

    recorded: bool
    reason: UnrecordedReason | None = None


def _authority(registry: HeartbeatRegistry, instance: str,
               expected: str | None) -> tuple[UnrecordedReason | None, int | None]:
    """(why the witness gives no authority, or ``None``; the generation's epoch)."""
    if expected is None or not is_generation_id(expected):
        return "unwitnessed", None
    try:
        record = registry.read_generation(instance)
    except RecordError:
        return "missing", None  # an unreadable record is no authority either
    if record is None:
        return "missing", None
    if record.generation_id != expected:
        return "stale", None
    if record.status == "terminal":
        return "terminal", None
    if record.status == "archived":
        return "archived", None
    return None, record.epoch


def _audit_name() -> str:
    return f"{time.time_ns():020d}-{os.urandom(4).hex()}"


class AuditJournal:
    """How a sweep persists its audit records: at once, then durably in one batch.

    :meth:`append` writes each record to a new file (``audit/<id>.json``) by atomic
    rename before returning, so it is persisted (every reader and every later
    process sees it) before the sweep acts on it: the failure this protocol covers
    is a process's death, which loses no write the kernel has, so nothing is
    fsynced (see docs/file-custody.md, Durability). :meth:`seal` writes every record
    of the sweep into one batch file and then removes the single-record files, so
    the folder holds a file per sweep, not per record. A record appears in
    both until then; readers drop the duplicate by ``record_id``. New names only:
    replacing an existing file costs a data flush on some filesystems (ext4).
    """

    def __init__(self, registry: HeartbeatRegistry) -> None:
        self.registry = registry
        self._written: list[tuple[Path, AuditRecord]] = []

    def append(self, record: AuditRecord) -> None:
        """Persist ``record``; raises ``OSError`` with nothing half-written."""
        path = self.registry.audit_dir / f"{record.record_id}.json"
        publish(path, encode_json([record]), durable=False)
        self._written.append((path, record))

    def seal(self) -> None:
        """Gather this sweep's records into one batch file. Idempotent.

        If the batch cannot be written, the single-record files stay as they are.
        """
        if not self._written:
            return
        try:
            publish(self.registry.audit_dir / f"{_audit_name()}.json",
                    encode_json([record for _, record in self._written]), durable=False)
        except OSError:
            return
        for path, _ in self._written:
            with contextlib.suppress(OSError):
                path.unlink()
        self._written = []


def _persist(registry: HeartbeatRegistry, record: AuditRecord,
             journal: AuditJournal | None) -> None:
    if journal is not None:
        journal.append(record)
        return
    own = AuditJournal(registry)
    own.append(record)
    own.seal()


def record_live_sweep_observation(
    registry: HeartbeatRegistry,
    instance: str,
    *,
    observed: FileRevision,
    expected_generation_id: str | None,
    emit: Emit | None = None,
    hooks: SweepHooks = NO_HOOKS,
    journal: AuditJournal | None = None,
) -> AuditOutcome:
    """Record that a sweep observed ``instance``'s heartbeat stale, for the witnessed generation.

    ``expected_generation_id`` must be captured from the observed state; ``None``
    means no usable witness and is never upgraded to a generation found later.
    Nothing is written unless that generation is the live current one before
    custody, after acquiring it, and immediately before the write. ``journal``
    batches the record with a sweep's others; without one it is written alone.
    """
    reason, _ = _authority(registry, instance, expected_generation_id)
    if reason is not None:
        return AuditOutcome(recorded=False, reason=reason)
    with registry.with_generation_custody(instance):
        reason, epoch = _authority(registry, instance, expected_generation_id)
        if reason is not None:
            return AuditOutcome(recorded=False, reason=reason)
        hooks.call("before_audit_write", instance)
        reason, final_epoch = _authority(registry, instance, expected_generation_id)
        if reason is not None or final_epoch != epoch:
            return AuditOutcome(recorded=False, reason=reason or "stale")
        try:
            _persist(registry, AuditRecord(
                kind="sweep_observed", record_id=_audit_name(), instance=instance,
                generation_id=expected_generation_id, observed=observed,
                recorded_at=time.time(), epoch=epoch), journal)
        except OSError:
            return AuditOutcome(recorded=False, reason="write-failed")
    if emit is not None:
        emit("lifecycle.sweep_observed", provisional=True)
    return AuditOutcome(recorded=True)


def record_sweep_unrecorded(
    registry: HeartbeatRegistry,
    instance: str,
    *,
    reason: UnrecordedReason,
    observed: FileRevision,
    generation_id: str | None,
    emit: Emit | None = None,
    journal: AuditJournal | None = None,
) -> bool:
    """Leave a ``heartbeat_sweep_unrecorded`` diagnostic; returns whether it was persisted.

    It reopens nothing: the generation's status is not touched.
    """
    try:
        _persist(registry, AuditRecord(
            kind="heartbeat_sweep_unrecorded", record_id=_audit_name(), instance=instance,
            generation_id=generation_id if is_generation_id(generation_id) else None,
            observed=observed, recorded_at=time.time(), reason=reason), journal)
        persisted = True
    except OSError:
        persisted = False
    if emit is not None:
        emit("custody.heartbeat_sweep_unrecorded", reason=reason, persisted=persisted)
    return persisted


def read_audit_records(registry: HeartbeatRegistry) -> tuple[list[AuditRecord], int]:
    """Every readable audit record once (oldest file first), and how many files could
    not be read."""
    try:
        paths = sorted(p for p in registry.audit_dir.iterdir()
                       if p.suffix == ".json" and not p.name.startswith("."))
    except FileNotFoundError:
        return [], 0
    records: dict[str, AuditRecord] = {}
    unreadable = 0
    for path in paths:
        try:
            data = read_capped(path, MAX_AUDIT_FILE_BYTES)
            if data is None:
                continue  # sealed into a batch since the listing
            batch = decode_json(data, list[AuditRecord], what=str(path))
        except (OSError, RecordError, OversizedRecordError):
            unreadable += 1  # oversized files are refused unread, and counted here
            continue
        for record in batch:
            records.setdefault(record.record_id, record)
    return sorted(records.values(), key=lambda r: r.record_id), unreadable
