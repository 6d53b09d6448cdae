"""The custody worker: each tick, recover interrupted deletions, then sweep.

The registry folder is ``[plugins.file-custody] directory`` (relative paths are
under the host root), by default ``<root>/plugins/file-custody/registry``. A
registry that does not exist is not created: the worker reports zero counts.
Where custody cannot run (Windows) the worker reports ``unavailable: 1`` and
does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hostcore.plugin.registration import StepFailed, WorkerResult
from hostcore_file_custody.events import RECOVERY_COUNTS
from hostcore_file_custody.hooks import NO_HOOKS, SweepHooks
from hostcore_file_custody.settings import PLUGIN_NAME, CustodyConfig, registry_folder
from hostcore_file_custody.support import AVAILABLE

if TYPE_CHECKING:
    from collections.abc import Callable

    from hostcore.host import Host
    from hostcore_file_custody.anchor import RegistryAnchor
    from hostcore_file_custody.recovery import FileRecoveryResult
    from hostcore_file_custody.registry import HeartbeatRegistry
    from hostcore_file_custody.sweep import SweepReport

# The sweep, the registry and recovery are imported where they run, not here: this
# module is imported whenever a host is built (benchmarks/startup.py).

def registry_path(host: Host) -> Path:
    """The registry folder the host is configured for (not created)."""
    return registry_folder(host.root, host.plugin_config(PLUGIN_NAME, CustodyConfig))


def registry_for(host: Host) -> HeartbeatRegistry:
    """The host's heartbeat registry, created if missing (for embedding agents)."""
    from hostcore_file_custody.registry import HeartbeatRegistry

    return HeartbeatRegistry(registry_path(host)).ensure()


def superseded_in(folder_fd: int) -> Callable[[str], bool]:
    """Recovery's rule for cache files: an interrupted deletion may complete when
    something newer lives at the source path (the pinned bytes are superseded);
    otherwise the bytes are put back and the next sweep judges them afresh. Looked
    up in the held folder, not through a path that may lead elsewhere by now."""

    def superseded(source_path: str) -> bool:
        try:
            os.stat(os.path.basename(source_path), dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    return superseded


def recover_registry(registry: HeartbeatRegistry) -> dict[str, list[FileRecoveryResult]]:
    """Recover the interrupted deletions of every cache folder of ``registry``.

    Raises :class:`~hostcore_file_custody.errors.RegistryRefused` when the registry
    is a symlink, another user's or world-writable (nothing is read then).
    """
    from hostcore_file_custody.anchor import RegistryAnchor

    anchor = RegistryAnchor.open(registry.root)
    if anchor is None:
        return {}
    with anchor:
        return recover_anchored(registry, anchor)


def recover_anchored(registry: HeartbeatRegistry,
                     anchor: RegistryAnchor) -> dict[str, list[FileRecoveryResult]]:
    """:func:`recover_registry` through folders already held open."""
    from hostcore_file_custody.recovery import recover_interrupted_file_deletions

    results: dict[str, list[FileRecoveryResult]] = {}
    for kind, folder in registry.cache_dirs.items():
        folder_fd = anchor.folder(kind)
        results[kind] = [] if folder_fd is None else recover_interrupted_file_deletions(
            folder, superseded_in(folder_fd), dir_fd=folder_fd)
    return results


def recovery_counts(results: dict[str, list[FileRecoveryResult]]) -> dict[str, int]:
    counts = dict.fromkeys(RECOVERY_COUNTS, 0)
    for folder_results in results.values():
        for result in folder_results:
            counts[result.outcome.replace("-", "_")] += 1
    return counts


class CustodyPassReport(msgspec.Struct, kw_only=True):
    recovery: dict[str, int]
    sweep: SweepReport

    def counts(self) -> dict[str, int]:
        merged = {f"recovery_{k}": v for k, v in self.recovery.items() if v}
        merged.update({f"sweep_{k}": v for k, v in self.sweep.counts().items()})
        return merged

    def refusal(self) -> str | None:
        """Why the pass must fail its step although it went on, or ``None``: records
        refused unread for their size, or a root moved mid-sweep (the sweep stopped)."""
        if self.sweep.refused:
            return ("the registry folder's path stopped naming the folder being swept "
                    "(replaced, or swapped for a symlink): the sweep stopped there")
        oversized = self.sweep.oversized + self.recovery.get("kept_oversized", 0)
        if oversized:
            return (f"{oversized} record(s) over their size cap were refused unread and "
                    "kept (see `hostcore custody status`)")
        return None


def run_custody_pass(registry: HeartbeatRegistry, *, emit: Any = None,
                     hooks: SweepHooks = NO_HOOKS, **sweep_options: Any) -> CustodyPassReport:
    """Recovery of interrupted deletions first (with killed writers' leftovers
    pruned by age), then one stale sweep. Raises
    :class:`~hostcore_file_custody.errors.RegistryRefused` before anything is read
    when the registry is a symlink, another user's or world-writable."""
    from hostcore_file_custody.anchor import RegistryAnchor
    from hostcore_file_custody.maintenance import prune_leftovers
    from hostcore_file_custody.sweep import StaleSweep

    anchor = RegistryAnchor.open(registry.root)
    recovery = recovery_counts({})
    if anchor is not None:
        with anchor:
            recovery = recovery_counts(recover_anchored(registry, anchor))
            recovery["leftovers_pruned"] = prune_leftovers(anchor)
    if emit is not None:
        emit("custody.recovery_completed", **recovery)
    sweep = StaleSweep(registry, emit=emit, hooks=hooks, **sweep_options).run()
    return CustodyPassReport(recovery=recovery, sweep=sweep)


class CustodyWorker:
    """Runs :func:`run_custody_pass` over the configured registry each tick."""

    name = PLUGIN_NAME
    order = 60

    def __init__(self, host: Host) -> None:
        # Read at registration so a bad [plugins.file-custody] table fails the load.
        self.path = registry_path(host)

    def run(self, host: Host) -> WorkerResult:
        if not AVAILABLE:
            return WorkerResult(counts={"registries": 0, "unavailable": 1})
        if not self.path.is_dir():
            return WorkerResult(counts={"registries": 0})
        from hostcore_file_custody.errors import CustodyError, RegistryRefused
        from hostcore_file_custody.registry import HeartbeatRegistry

        try:
            report = run_custody_pass(HeartbeatRegistry(self.path), emit=host.emit)
        except RegistryRefused as exc:
            raise StepFailed({"registries": 1, "refused": 1}) from exc
        counts = {"registries": 1, **report.counts()}
        refusal = report.refusal()
        if refusal is not None:
            # Counted, kept, and the step fails: `run --once` exits 1 until it is dealt with.
            failure = (RegistryRefused(f"{self.path}: {refusal}", "moved")
                       if report.sweep.refused else CustodyError(f"{self.path}: {refusal}"))
            raise StepFailed(counts) from failure
        return WorkerResult(pending=report.sweep.deferred > 0, counts=counts)

    def status(self) -> dict[str, Any]:
        if AVAILABLE and not self.path.is_dir():
            return {"registries": 0}  # nothing to count, and nothing to import for it
        from hostcore_file_custody.registry import HeartbeatRegistry
        from hostcore_file_custody.status import custody_status

        report = custody_status(HeartbeatRegistry(self.path), include_audit=False)
        if not report["available"]:
            return {"unavailable": 1}
        return {k: v for k, v in report["counts"].items()
                if k not in ("observations", "diagnostics", "unreadable_audit_records")}
