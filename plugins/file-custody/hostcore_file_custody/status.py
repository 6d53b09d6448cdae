"""What ``hostcore custody status`` reports: counts read without taking any lock.

Besides the counts, status lists every operation held in a private custody
folder (what it protects, its owner's liveness as far as can be told without
probing a lock, its age), which is what a person reads before releasing one
with ``hostcore custody recover --release PATH``; and the last sweep's counts of
files it could not handle (``unhandled``) and of files kept because their filesystem
cannot put anything back without overwriting (``unsupported``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from hostcore_file_custody.anchor import RegistryAnchor
from hostcore_file_custody.audit import read_audit_records
from hostcore_file_custody.errors import RegistryRefused
from hostcore_file_custody.private import (
    RELEASED_DIR_NAME,
    list_operations,
    pending_custody,
)
from hostcore_file_custody.registry import HeartbeatRegistry
from hostcore_file_custody.support import AVAILABLE, UNAVAILABLE_MESSAGE
from hostcore_file_custody.sweep import STALE_AFTER_SECONDS, read_last_sweep

COUNT_KEYS = ("heartbeats", "stale_heartbeats", "pending_pins", "retained_pins",
              "malformed_manifests", "protected_folders", "foreign_manifests",
              "oldest_foreign_age_seconds", "released_evidence", "unhandled", "unsupported",
              "oversized", "refused", "observations",
              "diagnostics", "unreadable_audit_records")


def custody_status(registry: HeartbeatRegistry, *, stale_after: float = STALE_AFTER_SECONDS,
                   include_audit: bool = True) -> dict[str, Any]:
    """Counts of a registry: heartbeats (and how many are stale), pending custody per
    cache folder, foreign manifests and the oldest one's age, released evidence, what
    the last sweep could not handle, audit observations and diagnostics (read only
    when ``include_audit``: they grow with the registry's history), and every pending
    operation. Keys are stable (docs/file-custody.md).

    A registry custody refuses (a symlink, another user's, world-writable: see
    :mod:`.anchor`) is reported as ``refused`` (the message naming the folder and
    the fix) with ``counts.refused`` 1, and nothing in it is read."""
    if not AVAILABLE:
        return {"registry": str(registry.root), "available": False,
                "message": UNAVAILABLE_MESSAGE, "exists": registry.root.is_dir(),
                "counts": dict.fromkeys(COUNT_KEYS, 0), "folders": {}, "operations": [],
                "last_sweep": None, "refused": None}
    exists = registry.root.is_dir()
    counts = dict.fromkeys(COUNT_KEYS, 0)
    folders: dict[str, dict[str, Any]] = {}
    operations: list[dict[str, Any]] = []
    last = None
    refused = registry_refusal(registry) if exists else None
    counts["refused"] = int(refused is not None)
    if exists and refused is None:
        counts["heartbeats"], counts["stale_heartbeats"] = _heartbeats(registry, stale_after)
        oldest_foreign: float | None = None
        for kind, folder in registry.cache_dirs.items():
            pending = pending_custody(folder)
            released = _count_released(folder / RELEASED_DIR_NAME)
            folders[kind] = {"manifests": pending.manifests, "pins": pending.pins,
                             "retained": pending.retained, "malformed": pending.malformed,
                             "foreign": pending.foreign, "other_folder": pending.other_folder,
                             "oversized": pending.oversized, "released": released,
                             "protected": pending.unknown}
            counts["pending_pins"] += pending.pins
            counts["retained_pins"] += pending.retained
            counts["malformed_manifests"] += pending.malformed
            counts["oversized"] += pending.oversized
            counts["protected_folders"] += pending.unknown
            counts["foreign_manifests"] += pending.foreign
            counts["released_evidence"] += released
            if pending.oldest_foreign_seconds is not None:
                oldest_foreign = max(oldest_foreign or 0.0, pending.oldest_foreign_seconds)
            operations += [{"folder": kind, **msgspec.structs.asdict(view)}
                           for view in list_operations(folder)]
        counts["oldest_foreign_age_seconds"] = int(oldest_foreign or 0)
        last = read_last_sweep(registry)
        if last is not None:
            counts["unhandled"] = last.counts.get("unhandled", 0)
            counts["unsupported"] = last.counts.get("unsupported", 0)
            counts["oversized"] += last.counts.get("oversized", 0)
        records, unreadable = read_audit_records(registry) if include_audit else ([], 0)
        counts["unreadable_audit_records"] = unreadable
        for record in records:
            key = "observations" if record.kind == "sweep_observed" else "diagnostics"
            counts[key] += 1
    return {"registry": str(registry.root), "available": True, "exists": exists,
            "counts": counts, "folders": folders, "operations": operations,
            "last_sweep": None if last is None else msgspec.structs.asdict(last),
            "refused": refused}


def registry_refusal(registry: HeartbeatRegistry) -> str | None:
    """Why custody refuses the registry (a symlink, another user's, world-writable),
    or ``None``; opening it takes no lock and changes nothing."""
    try:
        anchor = RegistryAnchor.open(registry.root)
    except RegistryRefused as exc:
        return str(exc)
    except OSError:
        return None  # unreadable: the counts below show what could not be read
    if anchor is not None:
        anchor.close()
    return None


def _heartbeats(registry: HeartbeatRegistry, stale_after: float) -> tuple[int, int]:
    now = time.time()
    total = stale = 0
    try:
        with os.scandir(registry.heartbeats_dir) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".json"):
                    continue
                total += 1
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                except OSError:
                    continue
                stale += now - mtime > stale_after
    except OSError:
        pass
    return total, stale


def _count_released(folder: os.PathLike[str] | str) -> int:
    """Released operations kept as evidence (one release note each)."""
    try:
        return sum(1 for name in os.listdir(folder) if name.endswith(".release.json"))
    except OSError:
        return 0
