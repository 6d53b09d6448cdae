"""The evidence commands: ``evidence``, ``purge`` and ``policy``.

Module-level click commands (the built-in plugin in
:mod:`hostcore.evidence.plugin` adds them to the CLI), so a test can invoke any
of them directly.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal

import click

from hostcore.errors import ConfigError
from hostcore.evidence.inputs import PolicyStateError
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host, print_table
from hostcore.plugin.terminal import refuse, say
from hostcore.timestamps import parse

_WINDOWS_PATH = re.compile(r"^([A-Za-z]:[\\/]|\\\\)")


def _user_dir(value: str, param_hint: str) -> str:
    """A directory from the command line, made absolute without resolving symlinks
    (agents record the path they ran in). Windows-style paths are kept as given.

    An empty value is refused, not taken for the current folder (``policy full
    ""`` would otherwise override a ``local-only`` parent), and so is one with a
    tab, a newline or another control character (the class list is one entry per
    line, tab-separated)."""
    _check_text(value, param_hint, "a directory")
    if _WINDOWS_PATH.match(value):
        return value
    return os.path.abspath(os.path.expanduser(value))


def _dir_argument(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: check and resolve a directory before any state is touched."""
    hint = "--dir" if param.param_type_name == "option" else "DIRECTORY"
    return None if value is None else _user_dir(value, hint)


def _source_argument(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback: check a source id before any state is touched."""
    _check_text(value, "SOURCE", "a source id")
    return value


def _check_text(value: str, param_hint: str, what: str) -> None:
    """Refuse (bad usage, exit 2) an empty value or one with control characters."""
    if not value.strip():
        raise click.BadParameter(f"{what} must not be empty", param_hint=param_hint)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise click.BadParameter(f"{value!r}: {what} must not hold a tab, a newline or "
                                 "another control character", param_hint=param_hint)


@click.command("evidence")
@json_option
@pass_host(read_only=True)
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

@click.command("purge")
@click.option("--source", "source_id", help="Only rows of this source id.")
@click.option("--session", "session_id", help="Only rows of this session id.")
@click.option("--dir", "directory", callback=_dir_argument,
              help="Only rows recorded in DIR or below it.")
@click.option("--before", help="Only rows with a timestamp before this ISO-8601 time.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_host
def purge_command(host: Host, source_id: str | None, session_id: str | None,
                  directory: str | None, before: str | None, dry_run: bool, yes: bool,
                  as_json: bool) -> None:
    """Delete evidence matching every given selector (at least one).

    What a purge guarantees: every stored row matching all the selectors is
    deleted in one transaction (all or nothing), its bytes overwritten in the
    file, and a directory left without rows loses its name too. A row with a
    dedupe key (every transcript line and captured event has one) stays purged:
    a one-way digest of its key is kept, so reading the same line again (a
    transcript copied, renamed or rewritten, an event fetched again) never
    stores it again. New evidence is not affected: lines written later in a
    purged directory are stored (use `hostcore policy local-only DIR` to keep
    a directory from leaving). Rows without a key, and rows already exported,
    are beyond a purge's reach. Consumers see the purge as a new epoch of each
    partition that lost rows.

    Asks for confirmation unless --yes; without a terminal to ask on it refuses
    (exit 2) rather than wait. Prints what it removed as counts per partition.
    Keys of --json: dry_run, rows, partitions.<name> (rows deleted).
    """

    given = sum(v is not None for v in (source_id, session_id, directory, before))
    if not given:
        raise click.UsageError("give at least one of --source, --session, --dir, --before")
    if before is not None and parse(before) is None:
        raise click.BadParameter(f"{before!r} is not an ISO-8601 timestamp naming a moment "
                                 "in years 0001 to 9999 (UTC)", param_hint="--before")
    store = host.store

    def purge(dry_run: bool) -> dict[str, int]:
        return store.purge(source_id=source_id, session_id=session_id, directory=directory,
                           before=before, dry_run=dry_run)

    matching = purge(dry_run=True)
    rows: int = sum(matching.values())
    if not dry_run and not yes and rows:
        if not sys.stdin.isatty():
            click.echo("hostcore: purge needs confirmation and there is no terminal to "
                       "ask on; pass --yes to purge anyway", err=True)
            raise SystemExit(2)
        click.confirm(f"Delete {rows} row(s) from {len(matching)} "
                      "partition(s)? This cannot be undone", abort=True)
    deleted = matching if dry_run else purge(dry_run=False)
    if not dry_run:
        host.emit("evidence.purged", rows=sum(deleted.values()), partitions=len(deleted),
                  selectors=given)
    if as_json:
        emit_json({"dry_run": dry_run, "rows": sum(deleted.values()),
                   "partitions": deleted})
        return
    verb = "would delete" if dry_run else "deleted"
    detail = ", ".join(f"{name}: {count}" for name, count in sorted(deleted.items()))
    click.echo(f"{verb} {sum(deleted.values())} row(s)" + (f" ({detail})" if detail else ""))

@click.group("policy")
def policy_group() -> None:
    """Show or change the withholding policy of the export seam."""

@policy_group.command("show")
@json_option
@pass_host(read_only=True)
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

FORCE_HELP = "Record it even though nothing here knows it (skip the check)."


def _force_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option("--force", is_flag=True, help=FORCE_HELP)(f)


def _check_directory(host: Host, directory: str) -> None:
    """Refuse (exit 2) a directory that neither exists here nor holds stored rows (in
    it or below it). A typo would otherwise withhold nothing, and say nothing about
    it; a project deleted since its rows were stored is still worth a class."""
    if not (os.path.isdir(directory) or _holds_rows(host, directory)):
        refuse(f"{directory}: no such folder on this machine, and no stored row was "
               "recorded in it; nothing recorded", "pass --force to record it anyway")


def _holds_rows(host: Host, directory: str) -> bool:
    below = directory.rstrip("/\\") + "/"
    return any(d == directory or d.startswith(below) for d in host.store.directories())


def _known_sources(host: Host) -> set[str]:
    """Source ids this root can meet: its sources', a plugin worker's (capture stores
    rows under its own name), and every id some stored row carries. The host's own
    steps (ingest, export, poll) store none under theirs."""
    builtin = {i.name for i in host.plugin_infos() if i.status == "builtin"}
    workers = {reg.name for i in host.plugin_infos() if i.name not in builtin
               for reg in i.registrations if reg.kind == "worker"}
    return {source.name for source in host.sources} | workers | set(host.store.source_ids())


def _check_source(host: Host, source: str) -> None:
    """Refuse (exit 2) a source id nothing here provides or stored."""
    known = _known_sources(host)
    if source not in known:
        refuse(f"{source!r}: no installed plugin provides this source and no stored row "
               f"carries it (known: {', '.join(sorted(known)) or 'none'}); nothing recorded",
               "pass --force to record it anyway")


def class_command(class_: Literal["local-only", "full"]) -> None:
    @policy_group.command(class_, help=f"Mark DIRECTORY (and everything below it without "
                                       f"a longer entry) {class_}. A folder that does not "
                                       "exist is refused unless --force.")
    @click.argument("directory", callback=_dir_argument)
    @_force_option
    @json_option
    @pass_host
    def set_class(host: Host, directory: str, force: bool, as_json: bool) -> None:
        if not force:
            _check_directory(host, directory)
        with _policy_state():
            class_list = host.policy.input("class-list")
            before = dict(class_list.entries())
            class_list.set(directory, class_)
        host.emit("policy.updated", input="class-list", change=class_)
        _report({"directory": directory, "class": class_,
                 "changed": before.get(directory) != class_},
                f"{directory}: {class_}", host, as_json)

for class_ in ("local-only", "full"):
    class_command(class_)

def opt_command(change: str, opted_out: bool, help_text: str) -> None:
    @policy_group.command(change, help=help_text)
    @click.argument("source", callback=_source_argument)
    @_force_option
    @json_option
    @pass_host
    def set_opt(host: Host, source: str, force: bool, as_json: bool) -> None:
        if opted_out and not force:  # opting in only takes an id off the list
            _check_source(host, source)
        with _policy_state():
            opt_out = host.policy.input("sync-opt-out")
            changed = (source in opt_out.ids()) != opted_out
            opt_out.set(source, opted_out)
        host.emit("policy.updated", input="sync-opt-out", change=change)
        _report({"source": source, "opted_out": opted_out, "changed": changed},
                f"{source}: {'opted out of' if opted_out else 'opted in to'} sync"
                + ("" if changed else " (already)"), host, as_json)

opt_command("opt-out", True, "Withhold every row of SOURCE (its client opted out of sync). "
            "A source no installed plugin provides and no stored row carries is refused "
            "unless --force.")
opt_command("opt-in", False, "Stop withholding SOURCE's rows for the sync opt-out.")


@policy_group.command("remove")
@click.argument("entry", metavar="DIRECTORY|SOURCE", callback=_source_argument)
@json_option
@pass_host
def policy_remove(host: Host, entry: str, as_json: bool) -> None:
    """Remove DIRECTORY's class-list entry, or SOURCE from the opted-out sources.

    Either way what it covered follows the parent entries again. Nothing to
    remove is refused (exit 2); `hostcore policy show` lists the entries.
    Keys of --json: removed[{input, directory, class} | {input, source}],
    fingerprint.
    """
    directory = _user_dir(entry, "DIRECTORY|SOURCE")
    removed: list[dict[str, str]] = []
    with _policy_state():
        class_list, opt_out = host.policy.input("class-list"), host.policy.input("sync-opt-out")
        # The entry as typed, then as the absolute path `policy local-only` records.
        for candidate in dict.fromkeys((entry, directory)):
            class_ = class_list.remove(candidate)
            if class_ is not None:
                removed.append({"input": "class-list", "directory": candidate,
                                "class": class_})
        if entry in opt_out.ids():
            opt_out.set(entry, False)
            removed.append({"input": "sync-opt-out", "source": entry})
    if not removed:
        refuse(f"{entry}: no class-list entry and no opted-out source by that name",
               "`hostcore policy show` lists them")
    for item in removed:
        host.emit("policy.updated", input=item["input"], change="remove")
    text = "; ".join(f"{item['directory']}: {item['class']} entry removed"
                     if item["input"] == "class-list" else
                     f"{item['source']}: no longer opted out" for item in removed)
    _report({"removed": removed}, text, host, as_json)


def _report(report: dict[str, Any], text: str, host: Host, as_json: bool) -> None:
    """Print what a policy change did: JSON (with the new fingerprint), or ``text``."""
    report["fingerprint"] = host.policy.fingerprint()
    if as_json:
        emit_json(report)
        return
    say(f"{text}; fingerprint {report['fingerprint']}")


@contextlib.contextmanager
def _policy_state() -> Iterator[None]:
    """Turn an unreadable policy state file into a configuration error (exit 2)."""
    try:
        yield
    except PolicyStateError as exc:
        raise ConfigError(str(exc)) from None
