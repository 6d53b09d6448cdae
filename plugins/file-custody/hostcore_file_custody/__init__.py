"""hostcore-file-custody: race-safe sweeping of stale session heartbeat caches.

The file primitives delete exactly the bytes that were observed and recover
deletions interrupted by a dead process; the heartbeat registry gives every live
session one custody lock for its lifetime (the only lock a session start takes);
the stale sweep removes heartbeats whose owners are proven dead, fenced by the
generation it observed. Agent-owned sessions (:func:`start_agent_session`) are the
ones an agent's hooks start, refresh and end on its behalf: owned by the agent
process, one lock per call. See ``docs/file-custody.md``.

On a platform without ``flock`` and ``O_NOFOLLOW`` (Windows) the package still
imports; :data:`AVAILABLE` is false and every primitive raises
:class:`CustodyUnavailable` ("file custody is unavailable on this platform").

Importing the package is cheap: each name below loads its module on first use, so
the plugin's entry module (which hostcore imports whenever a host is built) does
not pay for the sweep, the registry or the audit journal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hostcore_file_custody.agent import AgentProcess, find_agent
    from hostcore_file_custody.agent_sessions import (
        AgentSessionResult,
        end_agent_session,
        refresh_agent_session,
        start_agent_session,
    )
    from hostcore_file_custody.audit import (
        AuditOutcome,
        record_live_sweep_observation,
        record_sweep_unrecorded,
    )
    from hostcore_file_custody.custody import Custody
    from hostcore_file_custody.deletion import DeleteFileResult, delete_file_if_unchanged
    from hostcore_file_custody.errors import (
        AgentUnresolved,
        CustodyError,
        CustodyRefused,
        CustodyUnavailable,
        FileAccessError,
        OversizedRecordError,
        RegistryRefused,
        UnsafePathError,
        UnstableRevisionError,
        WitnessError,
    )
    from hostcore_file_custody.hooks import SweepHooks
    from hostcore_file_custody.locks import LOCKS
    from hostcore_file_custody.owner import Liveness, OwnerRecord, current_owner, owner_liveness
    from hostcore_file_custody.private import pending_custody
    from hostcore_file_custody.recovery import (
        FileRecoveryResult,
        recover_interrupted_file_deletions,
    )
    from hostcore_file_custody.registry import (
        GenerationRecord,
        Heartbeat,
        HeartbeatRegistry,
        PidMapEntry,
        Session,
        with_generation_custody,
    )
    from hostcore_file_custody.release import ReleaseResult, release_custody
    from hostcore_file_custody.revision import (
        FileRevision,
        capture_file_revision,
        file_revision_matches,
    )
    from hostcore_file_custody.sessions import SessionView, list_sessions
    from hostcore_file_custody.support import AVAILABLE
    from hostcore_file_custody.sweep import StaleSweep, SweepReport, sweep_stale_heartbeats
    from hostcore_file_custody.writers import HeartbeatWriter, LiveCoordinationWriter

_HOMES = {
    "AVAILABLE": "hostcore_file_custody.support",
    "AgentProcess": "hostcore_file_custody.agent",
    "AgentSessionResult": "hostcore_file_custody.agent_sessions",
    "AgentUnresolved": "hostcore_file_custody.errors",
    "AuditOutcome": "hostcore_file_custody.audit",
    "Custody": "hostcore_file_custody.custody",
    "CustodyError": "hostcore_file_custody.errors",
    "CustodyRefused": "hostcore_file_custody.errors",
    "CustodyUnavailable": "hostcore_file_custody.errors",
    "DeleteFileResult": "hostcore_file_custody.deletion",
    "FileAccessError": "hostcore_file_custody.errors",
    "FileRecoveryResult": "hostcore_file_custody.recovery",
    "FileRevision": "hostcore_file_custody.revision",
    "GenerationRecord": "hostcore_file_custody.registry",
    "Heartbeat": "hostcore_file_custody.registry",
    "HeartbeatRegistry": "hostcore_file_custody.registry",
    "HeartbeatWriter": "hostcore_file_custody.writers",
    "LOCKS": "hostcore_file_custody.locks",
    "LiveCoordinationWriter": "hostcore_file_custody.writers",
    "Liveness": "hostcore_file_custody.owner",
    "OversizedRecordError": "hostcore_file_custody.errors",
    "OwnerRecord": "hostcore_file_custody.owner",
    "PidMapEntry": "hostcore_file_custody.registry",
    "RegistryRefused": "hostcore_file_custody.errors",
    "ReleaseResult": "hostcore_file_custody.release",
    "Session": "hostcore_file_custody.registry",
    "SessionView": "hostcore_file_custody.sessions",
    "StaleSweep": "hostcore_file_custody.sweep",
    "SweepHooks": "hostcore_file_custody.hooks",
    "SweepReport": "hostcore_file_custody.sweep",
    "UnsafePathError": "hostcore_file_custody.errors",
    "UnstableRevisionError": "hostcore_file_custody.errors",
    "WitnessError": "hostcore_file_custody.errors",
    "capture_file_revision": "hostcore_file_custody.revision",
    "current_owner": "hostcore_file_custody.owner",
    "delete_file_if_unchanged": "hostcore_file_custody.deletion",
    "end_agent_session": "hostcore_file_custody.agent_sessions",
    "file_revision_matches": "hostcore_file_custody.revision",
    "find_agent": "hostcore_file_custody.agent",
    "list_sessions": "hostcore_file_custody.sessions",
    "owner_liveness": "hostcore_file_custody.owner",
    "pending_custody": "hostcore_file_custody.private",
    "record_live_sweep_observation": "hostcore_file_custody.audit",
    "record_sweep_unrecorded": "hostcore_file_custody.audit",
    "recover_interrupted_file_deletions": "hostcore_file_custody.recovery",
    "refresh_agent_session": "hostcore_file_custody.agent_sessions",
    "release_custody": "hostcore_file_custody.release",
    "start_agent_session": "hostcore_file_custody.agent_sessions",
    "sweep_stale_heartbeats": "hostcore_file_custody.sweep",
    "with_generation_custody": "hostcore_file_custody.registry",
}

__all__ = [
    "AVAILABLE",
    "LOCKS",
    "AgentProcess",
    "AgentSessionResult",
    "AgentUnresolved",
    "AuditOutcome",
    "Custody",
    "CustodyError",
    "CustodyRefused",
    "CustodyUnavailable",
    "DeleteFileResult",
    "FileAccessError",
    "FileRecoveryResult",
    "FileRevision",
    "GenerationRecord",
    "Heartbeat",
    "HeartbeatRegistry",
    "HeartbeatWriter",
    "LiveCoordinationWriter",
    "Liveness",
    "OversizedRecordError",
    "OwnerRecord",
    "PidMapEntry",
    "RegistryRefused",
    "ReleaseResult",
    "Session",
    "SessionView",
    "StaleSweep",
    "SweepHooks",
    "SweepReport",
    "UnsafePathError",
    "UnstableRevisionError",
    "WitnessError",
    "capture_file_revision",
    "current_owner",
    "delete_file_if_unchanged",
    "end_agent_session",
    "file_revision_matches",
    "find_agent",
    "list_sessions",
    "owner_liveness",
    "pending_custody",
    "record_live_sweep_observation",
    "record_sweep_unrecorded",
    "recover_interrupted_file_deletions",
    "refresh_agent_session",
    "release_custody",
    "start_agent_session",
    "sweep_stale_heartbeats",
    "with_generation_custody",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hostcore_file_custody' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
