"""The telemetry events of the file custody plugin (counts, booleans and enums only)."""

from __future__ import annotations

from hostcore.telemetry import EventSpec

# The reasons of a heartbeat_sweep_unrecorded diagnostic (audit.UnrecordedReason). Kept
# here so that cataloguing the events, at host build, imports nothing of the protocol.
UNRECORDED_REASONS: tuple[str, ...] = ("unwitnessed", "missing", "terminal", "archived",
                                       "stale", "write-failed")


SWEEP_COUNTS = (
    "scanned", "candidates", "deferred", "deleted", "kept_fresh", "kept_live",
    "kept_uncertain", "kept_changed", "kept_refused", "kept_error", "retained", "vanished",
    "protected", "protected_folders", "observations", "diagnostics", "dependents_deleted",
    "dependents_kept", "unhandled", "unsupported", "oversized", "refused", "generations_pruned",
    "locks_pruned", "leftovers_pruned", "lock_acquisitions", "duration_ms",
)
RECOVERY_COUNTS = (
    "deleted", "restored", "cleared", "retained", "kept_foreign", "kept_live",
    "kept_unknown_owner", "kept_malformed", "kept_oversized", "kept_unknown", "kept_busy",
    "kept_error", "leftovers_pruned",
)

EVENTS = (
    EventSpec(
        "lifecycle.sweep_observed",
        {"provisional": bool},
        "A stale sweep recorded that it observed a session's heartbeat stale, attached to "
        "the generation captured from that heartbeat. Provisional: it never ends a session.",
    ),
    EventSpec(
        "custody.heartbeat_sweep_unrecorded",
        {"reason": UNRECORDED_REASONS, "persisted": bool},
        "A sweep could not attach its observation to a live generation (no witness, no "
        "record, ended or replaced generation, failed write) and left a diagnostic instead; "
        "persisted is false when the diagnostic could not be written (the cache is then kept).",
    ),
    EventSpec(
        "custody.sweep_completed",
        {name: int for name in SWEEP_COUNTS},
        "One stale sweep of a heartbeat registry finished: files scanned, candidates, "
        "confirmed deletions and every reason a file was kept, with its lock acquisitions.",
    ),
    EventSpec(
        "custody.recovery_completed",
        {name: int for name in RECOVERY_COUNTS},
        "Recovery of interrupted deletions finished over a registry's private custody "
        "folders: how many operations were completed, undone, retained or kept, by reason.",
    ),
)
