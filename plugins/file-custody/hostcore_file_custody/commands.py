"""``hostcore custody status``, ``custody sessions`` and ``custody recover [--release PATH]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import click
import msgspec

from hostcore.plugin.cli import emit_json, json_option, pass_host, print_table
from hostcore_file_custody.support import AVAILABLE, UNAVAILABLE_MESSAGE

if TYPE_CHECKING:
    from hostcore.host import Host


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def add_commands(cli: click.Group) -> None:
    @cli.group("custody")
    def custody() -> None:
        """Heartbeat registry custody: stale sweeps and interrupted deletions."""

    @custody.command("status")
    @json_option
    @pass_host
    def status(host: Host, as_json: bool) -> None:
        """Show the registry's counts and every operation held in custody.

        Takes no lock. Keys of --json: registry, available, exists,
        counts.{heartbeats, stale_heartbeats, pending_pins, retained_pins,
        malformed_manifests, protected_folders, foreign_manifests,
        oldest_foreign_age_seconds, released_evidence, unhandled, unsupported,
        oversized, refused, observations, diagnostics, unreadable_audit_records},
        folders.<folder>.{manifests, pins, retained, malformed, foreign, other_folder,
        oversized, released, protected}, operations[].{folder, op, source_path, state,
        owner, age_seconds, pinned, protects, location, note}, last_sweep.{finished_at,
        counts}, refused. Exit code 2 when custody refuses the registry folder (a
        symlink, another user's, world-writable): `refused` names it and the fix.
        """
        # The engine loads when a command runs, not when the commands are added:
        # `hostcore plugins` adds every plugin's commands, and the registry loads hashlib.
        from hostcore_file_custody.registry import HeartbeatRegistry
        from hostcore_file_custody.status import custody_status
        from hostcore_file_custody.worker import registry_path

        report = custody_status(HeartbeatRegistry(registry_path(host)))
        if as_json:
            emit_json(report)
            if report["refused"] is not None:
                _refuse(report["refused"])
            return
        if not report["available"]:
            click.echo(UNAVAILABLE_MESSAGE)
            return
        click.echo(f"registry: {report['registry']}"
                   + ("" if report["exists"] else " (does not exist)"))
        if report["refused"] is not None:
            _refuse(report["refused"])
        for key, value in report["counts"].items():
            click.echo(f"{key}: {value}")
        if report["operations"]:
            print_table(((o["folder"], o["source_path"] or "(unknown)", o["state"], o["owner"],
                          _age(o["age_seconds"]), o["protects"], o["location"])
                         for o in report["operations"]),
                        ("FOLDER", "SOURCE", "STATE", "OWNER", "AGE", "PROTECTS", "LOCATION"))

    @custody.command("sessions")
    @json_option
    @pass_host
    def sessions(host: Host, as_json: bool) -> None:
        """List every session of the registry, its state and its owner's liveness.

        Takes no lock (and probes none). Keys of --json: registry, exists,
        sessions[].{instance, generation, state (live, ended), owner_pid,
        owner_kind (agent, process), liveness (live, dead, unknown)}, unreadable,
        refused. Exit code 2 when custody refuses the registry folder.
        """
        from hostcore_file_custody.registry import HeartbeatRegistry
        from hostcore_file_custody.sessions import list_sessions
        from hostcore_file_custody.status import registry_refusal
        from hostcore_file_custody.worker import registry_path

        registry = HeartbeatRegistry(registry_path(host))
        exists = registry.root.is_dir()
        refused = registry_refusal(registry) if exists and AVAILABLE else None
        listed = list_sessions(registry) if exists and refused is None else None
        rows = [] if listed is None else [msgspec.structs.asdict(v) for v in listed.sessions]
        if as_json:
            emit_json({"registry": str(registry.root), "exists": exists, "sessions": rows,
                       "unreadable": 0 if listed is None else listed.unreadable,
                       "refused": refused})
        if refused is not None:
            _refuse(refused)
        if as_json:
            return
        if not rows:
            click.echo("no sessions" + ("" if exists else " (the registry does not exist)"))
            return
        print_table(((r["instance"], r["generation"] or "-", r["state"],
                      "-" if r["owner_pid"] is None else str(r["owner_pid"]),
                      r["owner_kind"] or "-", r["liveness"]) for r in rows),
                    ("INSTANCE", "GENERATION", "STATE", "OWNER PID", "OWNER KIND", "LIVENESS"))

    @custody.command("recover")
    @click.option("--release", "release", multiple=True, metavar="PATH",
                  help="Release the custody operation at PATH (a LOCATION from `custody "
                       "status`, or a source path), keeping its evidence. Repeatable.")
    @json_option
    @pass_host
    def recover(host: Host, release: tuple[str, ...], as_json: bool) -> None:
        """Finish or undo deletions interrupted by a dead process.

        Acts only on operations of this host and PID namespace whose creator is
        proven dead (or that were retained); keeps everything else and says why,
        with its age. Keys of --json: registry, counts.<outcome>,
        results[].{folder, source_path, outcome, recovery_location, reason,
        age_seconds}.

        With --release PATH, releases what recovery keeps instead: refused while
        the operation's creator is provably alive; a pinned file goes back to its
        source path when that is free; the rest moves to `.custody-released/`
        beside the folder. Keys of --json: released[].{op, outcome, source_path,
        evidence_location, reason}. Exit code 1 when any release was refused.
        """
        from hostcore_file_custody.registry import HeartbeatRegistry
        from hostcore_file_custody.worker import (
            recover_registry,
            recovery_counts,
            registry_path,
        )

        if not AVAILABLE:
            if as_json:
                emit_json({"available": False, "message": UNAVAILABLE_MESSAGE})
            else:
                click.echo(UNAVAILABLE_MESSAGE)
            return
        if release:
            _release(release, as_json)
            return
        from hostcore_file_custody.errors import RegistryRefused

        registry = HeartbeatRegistry(registry_path(host))
        try:
            results = recover_registry(registry) if registry.root.is_dir() else {}
        except RegistryRefused as exc:
            _refuse(str(exc))
        rows: list[dict[str, Any]] = [
            {"folder": folder, "source_path": r.source_path, "outcome": r.outcome,
             "recovery_location": r.recovery_location, "reason": r.reason,
             "age_seconds": r.age_seconds}
            for folder, folder_results in results.items() for r in folder_results]
        if as_json:
            emit_json({"registry": str(registry.root), "counts": recovery_counts(results),
                       "results": rows})
            return
        if not rows:
            click.echo("nothing to recover")
            return
        print_table(((r["folder"], r["source_path"] or "(unknown)", r["outcome"],
                      _age(r["age_seconds"]), r["recovery_location"] or "-", r["reason"])
                     for r in rows),
                    ("FOLDER", "SOURCE", "OUTCOME", "AGE", "RECOVERY LOCATION", "REASON"))


def _refuse(refused: str) -> NoReturn:
    """One line on stderr naming the refused folder and the fix, and exit status 2
    (docs/cli.md: a folder other users could write, or swap, is a configuration error)."""
    click.echo(f"hostcore: custody: {refused}", err=True)
    raise SystemExit(2)


def _release(paths: tuple[str, ...], as_json: bool) -> None:
    from hostcore_file_custody.release import release_custody

    results = [result for path in paths for result in release_custody(path)]
    refused = any(r.outcome not in ("released", "released-restored") for r in results)
    if as_json:
        emit_json({"released": [msgspec.structs.asdict(r) for r in results]})
    else:
        print_table(((r.op or "-", r.source_path or "(unknown)", r.outcome,
                      r.evidence_location or "-", r.reason) for r in results),
                    ("OPERATION", "SOURCE", "OUTCOME", "EVIDENCE", "REASON"))
    if refused:
        # One line on stderr naming what failed, and exit status 1 (docs/cli.md).
        failed = [r for r in results if r.outcome not in ("released", "released-restored")]
        click.echo(f"hostcore: custody release: {len(failed)} of {len(results)} not released "
                   f"({', '.join(sorted({r.outcome for r in failed}))})", err=True)
        raise SystemExit(1)
