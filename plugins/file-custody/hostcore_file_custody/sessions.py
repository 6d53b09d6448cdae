"""What ``hostcore custody sessions`` lists: every session of a registry, read without a lock.

A session is an instance with a heartbeat or a generation record. Its ``state`` is the
generation record's word (``ended`` once terminal or archived, or when its heartbeat
says its end ran), its owner the heartbeat's, and its ``liveness`` what the owner's PID
and start time prove here (:func:`~.owner.owner_liveness` without probing a lock):
``live``, ``dead``, or ``unknown`` (no heartbeat, another host or PID namespace, or a
``/proc`` that cannot tell). Records are untrusted: read without following a symlink,
up to their cap; one that cannot be read is counted ``unreadable`` and the rest listed.
"""

from __future__ import annotations

import os
from typing import Literal

import msgspec

from hostcore.errors import RecordError
from hostcore_file_custody.errors import CustodyError
from hostcore_file_custody.owner import Liveness, owner_liveness
from hostcore_file_custody.registry import (
    GenerationRecord,
    Heartbeat,
    HeartbeatRegistry,
    OwnerKind,
    check_instance,
)

State = Literal["live", "ended"]
SessionLiveness = Literal["live", "dead", "unknown"]
_LIVENESS: dict[Liveness, SessionLiveness] = {Liveness.ALIVE: "live", Liveness.DEAD: "dead"}


class SessionView(msgspec.Struct, frozen=True, kw_only=True):
    """One session as ``custody sessions`` shows it (the keys of its ``--json``)."""

    instance: str
    generation: str | None
    state: State
    owner_pid: int | None
    owner_kind: OwnerKind | None
    liveness: SessionLiveness


class SessionList(msgspec.Struct, frozen=True, kw_only=True):
    sessions: list[SessionView]
    unreadable: int


def _names(folder: os.PathLike[str] | str) -> set[str]:
    """Instance names of the ``*.json`` records in ``folder`` (temp files and names that
    are no instance's left out)."""
    names = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                stem, dot, suffix = entry.name.rpartition(".")
                if entry.name.startswith(".") or not dot or suffix != "json":
                    continue
                try:
                    names.add(check_instance(stem))
                except CustodyError:
                    continue
    except FileNotFoundError:
        pass
    return names


def list_sessions(registry: HeartbeatRegistry) -> SessionList:
    """Every session of ``registry``, by instance name."""
    unreadable = 0
    views = []
    for instance in sorted(_names(registry.heartbeats_dir) | _names(registry.generations_dir)):
        heartbeat: Heartbeat | None = None
        record: GenerationRecord | None = None
        try:
            heartbeat = registry.read_heartbeat(instance)
        except (RecordError, OSError):
            unreadable += 1
        try:
            record = registry.read_generation(instance)
        except (RecordError, OSError):
            unreadable += 1
        if heartbeat is None and record is None:
            continue  # gone since the listing, or unreadable (counted)
        views.append(_view(instance, heartbeat, record))
    return SessionList(sessions=views, unreadable=unreadable)


def _view(instance: str, heartbeat: Heartbeat | None,
          record: GenerationRecord | None) -> SessionView:
    generation = record.generation_id if record is not None else (
        heartbeat.generation_id if heartbeat is not None else None)
    end_ran = (heartbeat is not None and heartbeat.ended_at is not None
               and heartbeat.generation_id == generation)
    ended = end_ran or (record is not None and record.status != "live")
    if heartbeat is None:
        return SessionView(instance=instance, generation=generation,
                           state="ended" if ended else "live", owner_pid=None,
                           owner_kind=None, liveness="unknown")
    liveness = _LIVENESS.get(owner_liveness(heartbeat.owner, probe=False), "unknown")
    return SessionView(instance=instance, generation=generation,
                       state="ended" if ended else "live", owner_pid=heartbeat.owner.pid,
                       owner_kind=heartbeat.owner_kind, liveness=liveness)
