"""What ``hostcore custody status`` reports: counts read without taking any lock."""

from __future__ import annotations

import os
import time
from typing import Any

from hostcore_file_custody.audit import read_audit_records
from hostcore_file_custody.deletion import pending_custody
from hostcore_file_custody.registry import HeartbeatRegistry
from hostcore_file_custody.sweep import STALE_AFTER_SECONDS


def custody_status(registry: HeartbeatRegistry, *, stale_after: float = STALE_AFTER_SECONDS,
                   include_audit: bool = True) -> dict[str, Any]:
    """Counts of a registry: heartbeats (and how many are stale), pending custody per
    cache folder, audit observations and diagnostics (read only when ``include_audit``:
    they grow with the registry's history). Keys are stable (docs/file-custody.md)."""
    exists = registry.root.is_dir()
    counts = {"heartbeats": 0, "stale_heartbeats": 0, "pending_pins": 0, "retained_pins": 0,
              "malformed_manifests": 0, "protected_folders": 0, "observations": 0,
              "diagnostics": 0, "unreadable_audit_records": 0}
    folders: dict[str, dict[str, Any]] = {}
    if exists:
        now = time.time()
        try:
            with os.scandir(registry.heartbeats_dir) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or not entry.name.endswith(".json"):
                        continue
                    counts["heartbeats"] += 1
                    try:
                        mtime = entry.stat(follow_symlinks=False).st_mtime
                    except FileNotFoundError:
                        continue
                    counts["stale_heartbeats"] += now - mtime > stale_after
        except FileNotFoundError:
            pass
        for kind, folder in registry.cache_dirs.items():
            pending = pending_custody(folder)
            folders[kind] = {"manifests": pending.manifests, "pins": pending.pins,
                             "retained": pending.retained, "malformed": pending.malformed,
                             "protected": pending.unknown}
            counts["pending_pins"] += pending.pins
            counts["retained_pins"] += pending.retained
            counts["malformed_manifests"] += pending.malformed
            counts["protected_folders"] += pending.unknown
        records, unreadable = read_audit_records(registry) if include_audit else ([], 0)
        counts["unreadable_audit_records"] = unreadable
        for record in records:
            key = "observations" if record.kind == "sweep_observed" else "diagnostics"
            counts[key] += 1
    return {"registry": str(registry.root), "exists": exists, "counts": counts,
            "folders": folders}
