"""Scenario builders for tests of code that embeds the heartbeat registry.

They fabricate what is hard to get on demand: a session whose process died an
hour ago (a reaped PID, an impossible start time, aged files), and writers of
this process that refresh or replace a generation under custody (reusing it
when the caller already holds it, as nested calls do). Never use them outside
tests: they write owner records that are not true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from hostcore_file_custody.audit import read_audit_records
from hostcore_file_custody.owner import OwnerRecord, current_owner
from hostcore_file_custody.registry import (
    GenerationRecord,
    GenerationStatus,
    Heartbeat,
    HeartbeatRegistry,
    PidMapEntry,
    new_generation_id,
)
from hostcore_file_custody.writers import HeartbeatWriter

HOUR = 3600.0


def dead_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    quick = shutil.which("true")
    child = subprocess.Popen([quick] if quick else [sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def dead_owner(registry: HeartbeatRegistry, instance: str, pid: int | None = None) -> OwnerRecord:
    """An owner record of this host whose process is gone (its start time cannot match)."""
    here = current_owner()
    return OwnerRecord(host=here.host, pid=pid or dead_pid(), start_ticks=1,
                       lock=str(registry.lock_path(instance)))


def age(path: Path, seconds: float = HOUR) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


class Planted(msgspec.Struct):
    instance: str
    generation_id: str
    pid: int


def plant_stale(registry: HeartbeatRegistry, instance: str, *,
                status: GenerationStatus = "live",
                generation_id: str | None = None, pid: int | None = None,
                record: bool = True) -> Planted:
    """A session whose process died an hour ago: generation record, heartbeat, pid-map
    entry and prompt hash, all aged past the stale window."""
    generation_id = generation_id or new_generation_id()
    owner = dead_owner(registry, instance, pid)
    if record:
        registry.write_generation(GenerationRecord(
            instance=instance, generation_id=generation_id, status=status,
            epoch=1, changed_at=time.time() - HOUR))
    registry.write_heartbeat(Heartbeat(instance=instance, generation_id=generation_id,
                                       owner=owner, refreshed_at=time.time() - HOUR))
    registry.write_pid_map(PidMapEntry(pid=owner.pid, instance=instance,
                                       generation_id=generation_id))
    registry.write_prompt_hash(instance, "prompt-digest")
    for path in (registry.heartbeat_path(instance), registry.pid_map_path(owner.pid),
                 registry.prompt_hash_path(instance)):
        age(path)
    return Planted(instance=instance, generation_id=generation_id, pid=owner.pid)


def refresh_same_generation(registry: HeartbeatRegistry, instance: str) -> bytes:
    """A resumed writer of this process refreshes the current generation's heartbeat
    (under custody, reused when the caller already holds it). Returns the bytes published."""
    record = registry.read_generation(instance)
    assert record is not None

    def mutate(current: Heartbeat | None) -> Heartbeat:
        base = current or Heartbeat(instance=instance, generation_id=record.generation_id,
                                    owner=current_owner())
        return msgspec.structs.replace(base, owner=current_owner(), seq=base.seq + 1,
                                       refreshed_at=time.time())

    HeartbeatWriter(registry).publish(instance, record.generation_id, mutate)
    return registry.heartbeat_path(instance).read_bytes()


def replace_generation(registry: HeartbeatRegistry, instance: str) -> tuple[str, bytes]:
    """A resumed writer of this process starts a replacement generation and publishes its
    heartbeat. Returns the new generation id and the bytes published."""
    with registry.with_generation_custody(instance):
        record = registry.read_generation(instance)
        generation_id = new_generation_id()
        registry.write_generation(GenerationRecord(
            instance=instance, generation_id=generation_id, status="live",
            epoch=(record.epoch + 1) if record else 1, changed_at=time.time()))
        registry.write_heartbeat(Heartbeat(instance=instance, generation_id=generation_id,
                                           owner=current_owner(), refreshed_at=time.time()))
    return generation_id, registry.heartbeat_path(instance).read_bytes()


def observations(registry: HeartbeatRegistry) -> list[str | None]:
    """Generation ids of every ``sweep_observed`` audit record."""
    records, unreadable = read_audit_records(registry)
    if unreadable:
        raise AssertionError(f"{unreadable} unreadable audit record(s)")
    return [r.generation_id for r in records if r.kind == "sweep_observed"]


def diagnostics(registry: HeartbeatRegistry) -> list[str | None]:
    """Reasons of every ``heartbeat_sweep_unrecorded`` diagnostic."""
    records, _ = read_audit_records(registry)
    return [r.reason for r in records if r.kind == "heartbeat_sweep_unrecorded"]


def private_entries(folder: Path) -> list[str]:
    """Visible entries of a cache folder's private custody folder."""
    private = folder / ".custody"
    if not private.exists():
        return []
    return sorted(n for n in os.listdir(private) if not n.startswith("."))
