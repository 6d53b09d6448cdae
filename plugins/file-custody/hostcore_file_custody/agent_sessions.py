"""Agent-owned sessions: a session a hook starts on behalf of the agent that runs it.

:meth:`~.registry.HeartbeatRegistry.start_session` makes the calling process the
owner and holds the instance's lock until it closes: right for an agent embedding
the registry, wrong for a hook, which returns within milliseconds and so leaves a
session proven dead while its agent still runs. An agent-owned session instead:

* is owned by the agent process (:mod:`.agent`: the nearest ancestor that is not a
  shell or a hook runner), recorded as its PID and start time, with no lifetime lock;
* takes the instance's custody lock only for the span of each write, and once per
  call: a start, a refresh that writes and an end each cost exactly one lock;
* refreshes at most once per :data:`REFRESH_INTERVAL_SECONDS`: the last refresh time
  is on the heartbeat, so a refresh within the interval is one read, no lock, no write;
* ends with a terminal generation record (fsynced) and a heartbeat marked
  ``ended_at``, its mtime set back so the next sweep takes it at once; the sweep
  deletes an ended generation's caches with no liveness probe;
* when its agent dies without an end, is judged by the PID and start time alone: a
  PID with no process, or running with another start time (reused), is dead.

Every write is an atomic rename, so a hook killed at any point leaves each record
whole, old or new; the kernel drops the lock with the hook. A second start (Claude
Code's ``SessionStart`` after a compaction) by the same agent resumes the live
generation; a start while another live (or unknown) owner's generation is current is
refused, one whose owner is proven dead replaces it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Literal

import msgspec

from hostcore.errors import RecordError
from hostcore_file_custody.agent import AgentProcess, agent_process, find_agent
from hostcore_file_custody.agent_events import REFRESH_INTERVAL_SECONDS
from hostcore_file_custody.errors import AgentUnresolved, CustodyRefused
from hostcore_file_custody.owner import Liveness, OwnerRecord, owner_liveness
from hostcore_file_custody.registry import (
    HEARTBEAT_VERSION,
    START_WAIT_SECONDS,
    GenerationRecord,
    Heartbeat,
    HeartbeatRegistry,
    PidMapEntry,
    check_instance,
    new_generation_id,
)
from hostcore_file_custody.support import require_custody

Outcome = Literal["started", "resumed", "refreshed", "unchanged", "ended", "already-ended",
                  "absent", "other-owner"]
Agent = AgentProcess | int | None
# Called with the name of each point between writes (tests kill a hook there).
OnStep = Callable[[str], None] | None


class AgentSessionResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a start, refresh or end did. ``wrote`` is whether it wrote any record.

    ``outcome``: ``started`` (a new generation), ``resumed`` (the same agent's live
    generation), ``refreshed``, ``unchanged`` (refreshed within the interval: nothing
    written), ``ended``, ``already-ended``, ``absent`` (no such session) or
    ``other-owner`` (another agent's session: left alone).
    """

    instance: str
    outcome: Outcome
    generation_id: str | None = None
    owner_pid: int | None = None
    wrote: bool = False


def _agent(agent: Agent) -> AgentProcess:
    if isinstance(agent, AgentProcess):
        return agent
    return find_agent() if agent is None else agent_process(agent)


def same_owner(recorded: OwnerRecord, owner: OwnerRecord) -> bool:
    """Whether two owner records name the same process: same PID, start time, boot and
    process space (a reused PID has another start time)."""
    return (recorded.pid == owner.pid and recorded.start_ticks == owner.start_ticks
            and recorded.host.boot_id == owner.host.boot_id
            and recorded.host.same_process_space(owner.host))


def _liveness(registry: HeartbeatRegistry, instance: str, owner: OwnerRecord) -> Liveness:
    """The owner's liveness judged while holding the instance's lock: an owner whose
    lifetime lock is that lock is known to hold it no longer (as the sweep judges)."""
    ours = owner.lock == str(registry.lock_path(instance))
    return owner_liveness(owner, lock_free=True if ours else None, probe=False)


def _read_heartbeat(registry: HeartbeatRegistry, instance: str) -> Heartbeat | None:
    # A disposable cache: a malformed or oversized one is as good as absent here.
    try:
        return registry.read_heartbeat(instance)
    except RecordError:
        return None


def _ensure(registry: HeartbeatRegistry) -> None:
    # One stat instead of the seven mkdirs of ensure(): a hook builds a new registry
    # object on every call.
    if not registry.locks_dir.is_dir():
        registry.ensure()


def _heal_pid_map(registry: HeartbeatRegistry, instance: str, pid: int,
                  generation_id: str) -> None:
    """Write the agent's pid-map entry unless it names this session already (a start
    killed before writing it left none)."""
    try:
        entry = registry.read_pid_map(pid)
    except RecordError:
        entry = None
    if entry is None or entry.instance != instance or entry.generation_id != generation_id:
        registry.write_pid_map(PidMapEntry(pid=pid, instance=instance,
                                           generation_id=generation_id))


def _step(on_step: OnStep, name: str) -> None:
    if on_step is not None:
        on_step(name)


def start_agent_session(registry: HeartbeatRegistry, instance: str, *, agent: Agent = None,
                        payload: dict[str, object] | None = None,
                        wait_seconds: float = START_WAIT_SECONDS,
                        on_step: OnStep = None) -> AgentSessionResult:
    """Start (or, for the same agent, resume) the agent-owned session ``instance``.

    ``agent`` is the owner: an :class:`~.agent.AgentProcess`, a PID, or ``None`` for the
    nearest non-shell ancestor of this process. One lock, held only for the writes.
    Raises :class:`~.errors.AgentUnresolved` when the agent cannot be identified and
    :class:`~.errors.CustodyRefused` while another live or unknown owner's generation
    is current (or the lock stays held past ``wait_seconds``).
    """
    require_custody()
    check_instance(instance)
    found = _agent(agent)
    owner = found.owner()
    _ensure(registry)
    with registry.with_generation_custody(instance, wait_seconds=wait_seconds):
        _step(on_step, "locked")
        record = registry.read_generation(instance)
        current = _read_heartbeat(registry, instance)
        now = time.time()
        if (record is not None and record.status == "live" and current is not None
                and current.generation_id == record.generation_id and current.ended_at is None):
            if current.owner_kind == "agent" and same_owner(current.owner, owner):
                registry.write_heartbeat(msgspec.structs.replace(
                    current, seq=current.seq + 1, refreshed_at=now))
                _heal_pid_map(registry, instance, owner.pid, current.generation_id)
                return AgentSessionResult(instance=instance, outcome="resumed",
                                          generation_id=current.generation_id,
                                          owner_pid=owner.pid, wrote=True)
            verdict = _liveness(registry, instance, current.owner)
            if verdict is not Liveness.DEAD:
                raise CustodyRefused(
                    f"{instance}: the current generation's owner is {verdict}; not replaced",
                    "held" if verdict is Liveness.ALIVE else "uncertain", "session")
        generation_id = new_generation_id()
        # Fsynced only when it replaces a generation still recorded live (see registry.py).
        registry.write_generation(GenerationRecord(
            instance=instance, generation_id=generation_id, status="live",
            epoch=(record.epoch + 1) if record else 1, changed_at=now),
            durable=record is not None and record.status == "live")
        _step(on_step, "generation-written")
        registry.write_heartbeat(Heartbeat(
            instance=instance, generation_id=generation_id, owner=owner, refreshed_at=now,
            payload=dict(payload or {}), version=HEARTBEAT_VERSION, owner_kind="agent"))
        _step(on_step, "heartbeat-written")
        registry.write_pid_map(PidMapEntry(pid=owner.pid, instance=instance,
                                           generation_id=generation_id))
    return AgentSessionResult(instance=instance, outcome="started", generation_id=generation_id,
                              owner_pid=owner.pid, wrote=True)


def refresh_agent_session(registry: HeartbeatRegistry, instance: str, *, agent: Agent = None,
                          interval: float = REFRESH_INTERVAL_SECONDS,
                          wait_seconds: float = START_WAIT_SECONDS,
                          on_step: OnStep = None) -> AgentSessionResult:
    """Refresh the agent-owned session ``instance`` unless it was refreshed within
    ``interval`` seconds: then one read, no lock, no write (``unchanged``). Only the
    owning agent refreshes; an ended or absent session is left as it is."""
    require_custody()
    check_instance(instance)
    current = _read_heartbeat(registry, instance)
    if current is None:
        return AgentSessionResult(instance=instance, outcome="absent")
    if current.ended_at is not None:
        return AgentSessionResult(instance=instance, outcome="already-ended",
                                  generation_id=current.generation_id)
    # A refresh time in the future means the clock was set back: refresh then, or the
    # heartbeat would wait out the gap unrefreshed.
    if 0.0 <= time.time() - current.refreshed_at < interval:
        return AgentSessionResult(instance=instance, outcome="unchanged",
                                  generation_id=current.generation_id,
                                  owner_pid=current.owner.pid)
    owner = _agent(agent).owner()
    if current.owner_kind != "agent" or not same_owner(current.owner, owner):
        return AgentSessionResult(instance=instance, outcome="other-owner",
                                  generation_id=current.generation_id)
    _ensure(registry)
    with registry.with_generation_custody(instance, wait_seconds=wait_seconds):
        _step(on_step, "locked")
        record = registry.read_generation(instance)
        current = _read_heartbeat(registry, instance)
        if current is None:
            return AgentSessionResult(instance=instance, outcome="absent")
        if (record is None or record.generation_id != current.generation_id
                or record.status != "live" or current.ended_at is not None):
            return AgentSessionResult(instance=instance, outcome="already-ended",
                                      generation_id=current.generation_id)
        if not same_owner(current.owner, owner):
            return AgentSessionResult(instance=instance, outcome="other-owner",
                                      generation_id=current.generation_id)
        registry.write_heartbeat(msgspec.structs.replace(
            current, seq=current.seq + 1, refreshed_at=time.time()))
    return AgentSessionResult(instance=instance, outcome="refreshed",
                              generation_id=current.generation_id, owner_pid=owner.pid,
                              wrote=True)


def end_agent_session(registry: HeartbeatRegistry, instance: str, *, agent: Agent = None,
                      wait_seconds: float = START_WAIT_SECONDS,
                      on_step: OnStep = None) -> AgentSessionResult:
    """End the current generation of ``instance``: a terminal generation record
    (fsynced), then its heartbeat marked ``ended_at`` with its mtime set back, so the
    next sweep deletes its caches without a liveness probe. One lock.

    An end whose agent cannot be identified (the agent exits as its last hooks run)
    still ends a session whose owner is not proven alive; another live agent's session
    is left alone (``other-owner``). Ending an ended generation completes what a
    killed end left (the heartbeat's mark) and is otherwise ``already-ended``.
    """
    require_custody()
    check_instance(instance)
    try:
        owner: OwnerRecord | None = _agent(agent).owner()
    except AgentUnresolved:
        owner = None
    _ensure(registry)
    with registry.with_generation_custody(instance, wait_seconds=wait_seconds):
        _step(on_step, "locked")
        record = registry.read_generation(instance)
        if record is None:
            return AgentSessionResult(instance=instance, outcome="absent")
        current = _read_heartbeat(registry, instance)
        if current is not None and current.generation_id != record.generation_id:
            current = None  # a replaced generation's cache: not this end's to mark
        if (current is not None and (owner is None or not same_owner(current.owner, owner))
                and _liveness(registry, instance, current.owner) is Liveness.ALIVE):
            return AgentSessionResult(instance=instance, outcome="other-owner",
                                      generation_id=record.generation_id)
        now = time.time()
        ended = record.status == "live"
        if ended:
            registry.write_generation(msgspec.structs.replace(
                record, status="terminal", epoch=record.epoch + 1, changed_at=now))
            _step(on_step, "generation-ended")
        marked = current is not None and current.ended_at is None
        if current is not None and marked:
            registry.write_heartbeat(msgspec.structs.replace(
                current, seq=current.seq + 1, ended_at=now))
            # Stale at once: the sweep's cheap pass takes it on its next scan.
            os.utime(registry.heartbeat_path(instance), (now, 0), follow_symlinks=False)
    return AgentSessionResult(instance=instance, outcome="ended" if ended else "already-ended",
                              generation_id=record.generation_id,
                              owner_pid=None if owner is None else owner.pid,
                              wrote=ended or marked)
