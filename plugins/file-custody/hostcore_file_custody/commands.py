"""``hostcore custody status`` and ``hostcore custody recover``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hostcore.cli import emit_json, json_option, pass_host, print_table
from hostcore_file_custody.registry import HeartbeatRegistry
from hostcore_file_custody.status import custody_status
from hostcore_file_custody.worker import recover_registry, recovery_counts, registry_path

if TYPE_CHECKING:
    from hostcore.host import Host


def add_commands(cli: click.Group) -> None:
    @cli.group("custody")
    def custody() -> None:
        """Heartbeat registry custody: stale sweeps and interrupted deletions."""

    @custody.command("status")
    @json_option
    @pass_host
    def status(host: Host, as_json: bool) -> None:
        """Show the registry's counts: heartbeats, stale ones, pending pins, audits.

        Takes no lock. Keys of --json: registry, exists, counts.{heartbeats,
        stale_heartbeats, pending_pins, retained_pins, malformed_manifests,
        protected_folders, observations, diagnostics, unreadable_audit_records},
        folders.<folder>.{manifests, pins, retained, malformed, protected}.
        """
        report = custody_status(HeartbeatRegistry(registry_path(host)))
        if as_json:
            emit_json(report)
            return
        click.echo(f"registry: {report['registry']}"
                   + ("" if report["exists"] else " (does not exist)"))
        for key, value in report["counts"].items():
            click.echo(f"{key}: {value}")

    @custody.command("recover")
    @json_option
    @pass_host
    def recover(host: Host, as_json: bool) -> None:
        """Finish or undo deletions interrupted by a dead process.

        Acts only on operations of this host and PID namespace whose creator is
        proven dead (or that were retained); keeps everything else and says why.
        Keys of --json: registry, counts.<outcome>, results[].{folder, source_path,
        outcome, recovery_location, reason}.
        """
        registry = HeartbeatRegistry(registry_path(host))
        results = recover_registry(registry) if registry.root.is_dir() else {}
        rows = [{"folder": folder, "source_path": r.source_path, "outcome": r.outcome,
                 "recovery_location": r.recovery_location, "reason": r.reason}
                for folder, folder_results in results.items() for r in folder_results]
        if as_json:
            emit_json({"registry": str(registry.root), "counts": recovery_counts(results),
                       "results": rows})
            return
        if not rows:
            click.echo("nothing to recover")
            return
        print_table(((r["folder"], r["source_path"] or "(unknown)", r["outcome"],
                      r["recovery_location"] or "-", r["reason"]) for r in rows),
                    ("FOLDER", "SOURCE", "OUTCOME", "RECOVERY LOCATION", "REASON"))
