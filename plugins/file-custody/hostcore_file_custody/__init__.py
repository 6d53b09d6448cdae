"""hostcore-file-custody: race-safe sweeping of stale session heartbeat caches.

The file primitives delete exactly the bytes that were observed and recover
deletions interrupted by a dead process; the heartbeat registry gives every live
session one custody lock for its lifetime (the only lock a session start takes);
the stale sweep removes heartbeats whose owners are proven dead, fenced by the
generation it observed. See ``docs/file-custody.md``.

On a platform without ``flock`` and ``O_NOFOLLOW`` (Windows) the package still
imports; :data:`AVAILABLE` is false and every primitive raises
:class:`CustodyUnavailable` ("file custody is unavailable on this platform").
"""

from hostcore_file_custody.audit import (
    AuditOutcome,
    record_live_sweep_observation,
    record_sweep_unrecorded,
)
from hostcore_file_custody.custody import Custody
from hostcore_file_custody.deletion import DeleteFileResult, delete_file_if_unchanged
from hostcore_file_custody.errors import (
    CustodyError,
    CustodyRefused,
    CustodyUnavailable,
    FileAccessError,
    UnsafePathError,
    UnstableRevisionError,
    WitnessError,
)
from hostcore_file_custody.hooks import SweepHooks
from hostcore_file_custody.locks import LOCKS
from hostcore_file_custody.owner import Liveness, OwnerRecord, current_owner, owner_liveness
from hostcore_file_custody.private import pending_custody
from hostcore_file_custody.recovery import FileRecoveryResult, recover_interrupted_file_deletions
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
from hostcore_file_custody.support import AVAILABLE
from hostcore_file_custody.sweep import StaleSweep, SweepReport, sweep_stale_heartbeats
from hostcore_file_custody.writers import HeartbeatWriter, LiveCoordinationWriter

__all__ = [
    "AVAILABLE",
    "LOCKS",
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
    "OwnerRecord",
    "PidMapEntry",
    "ReleaseResult",
    "Session",
    "StaleSweep",
    "SweepHooks",
    "SweepReport",
    "UnsafePathError",
    "UnstableRevisionError",
    "WitnessError",
    "capture_file_revision",
    "current_owner",
    "delete_file_if_unchanged",
    "file_revision_matches",
    "owner_liveness",
    "pending_custody",
    "record_live_sweep_observation",
    "record_sweep_unrecorded",
    "recover_interrupted_file_deletions",
    "release_custody",
    "sweep_stale_heartbeats",
    "with_generation_custody",
]
