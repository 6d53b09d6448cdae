"""Built-in: the evidence kernel's plugin face.

* the three built-in policy inputs (class-per-entry list, sync opt-out set,
  ``.hostcoreignore`` dotfiles), registered like any third-party input;
* the ``ingest`` worker (order 10): each tick asks every registered source for
  evidence since its persisted cursor and appends it with the new cursor in one
  transaction; a source that raises is logged by name, counted and skipped;
* the ``evidence``, ``purge`` and ``policy`` commands;
* the telemetry events of all of the above.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hostcore.markers import hookimpl
from hostcore.telemetry import EventSpec

if TYPE_CHECKING:
    import click

    from hostcore.host import Host
    from hostcore.types import WorkerResult

log = logging.getLogger("hostcore.evidence")

EVENTS = (
    EventSpec(
        "evidence.ingested",
        {"sources": int, "failed": int, "skipped": int, "rows": int, "more": bool},
        "The ingest step ran: how many sources were read, failed (raised or returned a "
        "bad batch) and were skipped as unavailable, how many rows were appended, and "
        "whether a source has more ready now.",
    ),
    EventSpec(
        "evidence.source_failed",
        {"reason": ("raised", "bad_batch")},
        "One source failed this tick and was skipped; the others still ingested. The "
        "log names the source.",
    ),
    EventSpec(
        "evidence.purged",
        {"rows": int, "partitions": int, "selectors": int},
        "A user purged evidence: rows deleted, partitions that lost rows (each moved to a "
        "new epoch) and how many selectors the purge combined.",
    ),
    EventSpec(
        "policy.updated",
        {"input": ("class-list", "sync-opt-out"),
         "change": ("full", "local-only", "opt-out", "opt-in")},
        "A user changed a machine-local withholding input through the CLI.",
    ),
)

_WINDOWS_PATH = re.compile(r"^([A-Za-z]:[\\/]|\\\\)")


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_policy_inputs(host: Host) -> tuple[Any, ...]:
    from hostcore.policy_inputs import (
        CLASS_LIST_FILE,
        OPT_OUT_FILE,
        ClassList,
        IgnoreDotfiles,
        SyncOptOut,
    )

    return (ClassList(host.root / CLASS_LIST_FILE), SyncOptOut(host.root / OPT_OUT_FILE),
            IgnoreDotfiles())


@hookimpl
def hostcore_workers(host: Host) -> IngestWorker:
    return IngestWorker()


class IngestWorker:
    """Appends each source's new evidence with its cursor, one transaction per source."""

    name = "ingest"
    order = 10

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def run(self, host: Host) -> WorkerResult:
        from hostcore.records import convert
        from hostcore.store import SourceBatch
        from hostcore.types import WorkerResult

        store = host.store
        counts = {"sources": 0, "failed": 0, "skipped": 0, "rows": 0}
        more = False
        for source in host.sources:
            if _unavailable(source):
                counts["skipped"] += 1
                continue
            counts["sources"] += 1
            try:
                batch = source.read(store.source_cursor(source.name))
            except Exception as exc:
                self._failed(host, counts, source.name, "raised", exc)
                continue
            try:
                if not isinstance(batch, SourceBatch):
                    batch = convert(batch, SourceBatch, what=f"source {source.name!r} batch")
                counts["rows"] += store.append(batch.rows, source=source.name,
                                               cursor=batch.cursor)
            except Exception as exc:
                self._failed(host, counts, source.name, "bad_batch", exc)
                continue
            more = more or batch.more
        host.emit("evidence.ingested", more=more, **counts)
        self._last = counts
        return WorkerResult(pending=more, counts=counts)

    def _failed(self, host: Host, counts: dict[str, int], name: str, reason: str,
                exc: Exception) -> None:
        counts["failed"] += 1
        # The message can carry a path: its kind at warning, the rest at debug.
        log.warning("source %r failed and was skipped this tick: %s", name,
                    type(exc).__name__)
        log.debug("source %r failed", name, exc_info=True)
        host.emit("evidence.source_failed", reason=reason)

    def status(self) -> dict[str, int]:
        return {f"last_{key}": value for key, value in self._last.items()}


def _unavailable(obj: Any) -> bool:
    check = getattr(obj, "availability", None)
    if not callable(check):
        return False
    try:
        return check() is not None
    except Exception:
        return True


# -- commands ------------------------------------------------------------------


def _user_dir(value: str) -> str:
    """A directory from the command line, made absolute without resolving symlinks
    (agents record the path they ran in). Windows-style paths are kept as given."""
    if _WINDOWS_PATH.match(value):
        return value
    return os.path.abspath(os.path.expanduser(value))


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    import click

    from hostcore.cli import emit_json, json_option, pass_host, print_table

    @cli.command("evidence")
    @json_option
    @pass_host
    def evidence_command(host: Host, as_json: bool) -> None:
        """Show evidence partitions, their versions (epoch:rowCount) and row counts.

        Keys of --json: instance_id, head_position, rows, partitions.<name>.{epoch,
        row_count, version}.
        """
        store = host.store
        parts = store.partitions()
        report = {
            "instance_id": store.instance_id,
            "head_position": store.head_position(),
            "rows": sum(v.row_count for v in parts.values()),
            "partitions": {name: {"epoch": v.epoch, "row_count": v.row_count,
                                  "version": str(v)} for name, v in parts.items()},
        }
        if as_json:
            emit_json(report)
            return
        print_table([(name, str(v), v.row_count) for name, v in parts.items()],
                    ("PARTITION", "VERSION", "ROWS"))
        click.echo(f"{report['rows']} row(s) in {len(parts)} partition(s); "
                   f"head position {report['head_position']}")

    @cli.command("purge")
    @click.option("--source", "source_id", help="Only rows of this source id.")
    @click.option("--session", "session_id", help="Only rows of this session id.")
    @click.option("--dir", "directory", help="Only rows recorded in DIR or below it.")
    @click.option("--before", help="Only rows with a timestamp before this ISO-8601 time.")
    @click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @json_option
    @pass_host
    def purge_command(host: Host, source_id: str | None, session_id: str | None,
                      directory: str | None, before: str | None, dry_run: bool, yes: bool,
                      as_json: bool) -> None:
        """Delete evidence matching every given selector (at least one).

        Asks for confirmation unless --yes; without a terminal to ask on it refuses
        (exit 2) rather than wait. Prints what it removed as counts per partition.
        Keys of --json: dry_run, rows, partitions.<name> (rows deleted).
        """
        from hostcore.store import parse_ts

        selectors = {"source_id": source_id, "session_id": session_id,
                     "directory": _user_dir(directory) if directory else None,
                     "before": before}
        given = {k: v for k, v in selectors.items() if v is not None}
        if not given:
            raise click.UsageError("give at least one of --source, --session, --dir, --before")
        if before is not None and parse_ts(before) is None:
            raise click.BadParameter(f"{before!r} is not an ISO-8601 timestamp",
                                     param_hint="--before")
        store = host.store
        matching = store.purge(**given, dry_run=True)
        if not dry_run and not yes and sum(matching.values()):
            if not sys.stdin.isatty():
                click.echo("hostcore: purge needs confirmation and there is no terminal to "
                           "ask on; pass --yes to purge anyway", err=True)
                raise SystemExit(2)
            click.confirm(f"Delete {sum(matching.values())} row(s) from {len(matching)} "
                          "partition(s)? This cannot be undone", abort=True)
        deleted = matching if dry_run else store.purge(**given)
        if not dry_run:
            host.emit("evidence.purged", rows=sum(deleted.values()), partitions=len(deleted),
                      selectors=len(given))
        if as_json:
            emit_json({"dry_run": dry_run, "rows": sum(deleted.values()),
                       "partitions": deleted})
            return
        verb = "would delete" if dry_run else "deleted"
        detail = ", ".join(f"{name}: {count}" for name, count in sorted(deleted.items()))
        click.echo(f"{verb} {sum(deleted.values())} row(s)" + (f" ({detail})" if detail else ""))

    @cli.group("policy")
    def policy_group() -> None:
        """Show or change the withholding policy of the export seam."""

    @policy_group.command("show")
    @json_option
    @pass_host
    def policy_show(host: Host, as_json: bool) -> None:
        """Show class-per-entry entries, opted-out sources and the policy fingerprint.

        Keys of --json: fingerprint, entries[{directory, class}], opted_out[],
        inputs[{name, fingerprinted}].
        """
        policy = host.policy
        with _policy_state():
            entries = policy.input("class-list").entries()
            opted_out = policy.input("sync-opt-out").ids()
        parts = policy.parts()
        report = {
            "fingerprint": policy.fingerprint(),
            "entries": [{"directory": d, "class": c} for d, c in entries],
            "opted_out": opted_out,
            "inputs": [{"name": name, "fingerprinted": part is not None}
                       for name, part in parts],
        }
        if as_json:
            emit_json(report)
            return
        click.echo(f"fingerprint: {report['fingerprint']}")
        click.echo("entries:" if entries else "entries: (none: every directory is full)")
        for directory, class_ in entries:
            click.echo(f"  {class_:<10}  {directory}")
        click.echo(f"opted-out sources: {', '.join(opted_out) or '(none)'}")
        click.echo("inputs: " + ", ".join(
            name + ("" if part is not None else " (not fingerprinted)") for name, part in parts))

    def class_command(class_: str) -> None:
        @policy_group.command(class_, help=f"Mark DIRECTORY (and everything below it without "
                                           f"a longer entry) {class_}.")
        @click.argument("directory")
        @pass_host
        def set_class(host: Host, directory: str) -> None:
            path = _user_dir(directory)
            with _policy_state():
                host.policy.input("class-list").set(path, class_)
            host.emit("policy.updated", input="class-list", change=class_)
            click.echo(f"{path}: {class_}; fingerprint {host.policy.fingerprint()}")

    for class_ in ("local-only", "full"):
        class_command(class_)

    def opt_command(change: str, opted_out: bool, help_text: str) -> None:
        @policy_group.command(change, help=help_text)
        @click.argument("source")
        @pass_host
        def set_opt(host: Host, source: str) -> None:
            with _policy_state():
                host.policy.input("sync-opt-out").set(source, opted_out)
            host.emit("policy.updated", input="sync-opt-out", change=change)
            click.echo(f"{source}: {'opted out of' if opted_out else 'opted in to'} sync; "
                       f"fingerprint {host.policy.fingerprint()}")

    opt_command("opt-out", True, "Withhold every row of SOURCE (its client opted out of sync).")
    opt_command("opt-in", False, "Stop withholding SOURCE's rows for the sync opt-out.")


@contextlib.contextmanager
def _policy_state() -> Iterator[None]:
    """Turn an unreadable policy state file into a configuration error (exit 2)."""
    from hostcore.errors import ConfigError
    from hostcore.policy_inputs import PolicyStateError

    try:
        yield
    except PolicyStateError as exc:
        raise ConfigError(str(exc)) from None
