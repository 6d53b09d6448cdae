"""The ``hostcore stamp``, ``check`` and ``approve`` commands.

Module-level click commands; the built-in plugin in
:mod:`hostcore.governance.plugin` adds them to the CLI. Bad input (a path in no
repository, a target that is no regular file) exits 2 naming it, before anything
is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import click

from hostcore.governance.gate import (
    STALE,
    BadTarget,
    TargetStatus,
    approve_targets,
    check,
    forget_targets,
    stamp_targets,
)
from hostcore.governance.inputs import OutsideRepository
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore.plugin.terminal import current, fit, paint, say

T = TypeVar("T")
_PATHS = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))


@click.command("stamp")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--session", metavar="ID", help="The agent session that wrote the files.")
@click.option("--item", metavar="REF", help="The work item the files were written for "
                                            "(its ledger decisions then govern them).")
@click.option("--forget", is_flag=True, help="Drop the stamps and verdicts of PATHS instead "
                                             "(deleted files too).")
@json_option
@pass_host
def stamp_command(host: Host, paths: tuple[Path, ...], session: str | None, item: str | None,
                  forget: bool, as_json: bool) -> None:
    """Record the governance in force over each PATH as the basis it was written under.

    Each PATH must be a regular file in a git repository. Re-stamping replaces the
    stamp. Exit 2 naming every bad PATH (then nothing is recorded).
    """
    if forget:
        count = forget_targets(host, paths)
        if as_json:
            emit_json({"forgotten": count})
        else:
            say(f"stamp: forgot {count} target(s)")
        return
    _report(_guarded(lambda: stamp_targets(host, paths, session=session, item=item)),
            as_json, {})


@click.command("check")
@_PATHS
@click.option("--session", metavar="ID", help="Only targets whose stamp this session made "
                                            "(with no PATH: in any repository).")
@json_option
@pass_host(read_only=True)
def check_command(host: Host, paths: tuple[Path, ...], session: str | None,
                  as_json: bool) -> None:
    """Check each PATH against the governance in force now (exit 1 when one is stale).

    A PATH that is a folder stands for every stamped target below it; with no PATH,
    every stamped target of the working folder's repository. A target is current,
    stale (the components that moved are named), or unstamped (listed, never a
    failure). A governing file that cannot be read, or a plugin whose inputs
    failed, leaves its component unknown: stale, never current. A stamped target
    deleted since is stale with `target` moved. Exit 0 when nothing is stale, 1 when
    something is, 2 for a PATH in no repository.

    Keys of --json: targets (path, status, moved).
    """
    found = _guarded(lambda: check(host, list(paths) if paths else None, session=session))
    _report(found.targets, as_json, found.failed_plugins)
    if any(t.status == STALE for t in found.targets):
        raise SystemExit(1)


@click.command("approve")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--reject", is_flag=True, help="Record a rejection: it vouches for nothing, and "
                                             "the producer's stamp stands.")
@json_option
@pass_host
def approve_command(host: Host, paths: tuple[Path, ...], reject: bool, as_json: bool) -> None:
    """Vouch for each PATH as it is, under the governance in force now.

    The target then clears `hostcore check` without being rewritten, until the
    governance moves again or it is stamped anew. Exit 2 naming every bad PATH.
    """
    _report(_guarded(lambda: approve_targets(host, paths, reject=reject)), as_json, {})


def _guarded(call: Callable[[], T]) -> T:
    try:
        return call()
    except (BadTarget, OutsideRepository) as exc:
        click.echo(f"hostcore: {exc}", err=True)
        raise SystemExit(2) from None


def _report(targets: Sequence[TargetStatus], as_json: bool, failed: dict[str, str]) -> None:
    for name, why in sorted(failed.items()):
        click.echo(f"hostcore: plugin {name!r} failed in hostcore_governance_inputs: {why}; "
                   "what it vouched for is unknown", err=True)
    if as_json:
        emit_json({"targets": [{"path": t.path, "status": t.status, "moved": list(t.moved)}
                               for t in targets]})
        return
    for line in table_lines(targets, current().width()):
        click.echo(line)


def table_lines(targets: Sequence[TargetStatus], width: int) -> list[str]:
    """A status column, a moved column and the path, fitted to ``width`` columns; the
    path is cut from its start, since a file's name is what tells it apart."""
    if not targets:
        return ["no stamped target"]
    status_w = max(len("status"), *(len(t.status) for t in targets))
    moved = [", ".join(t.moved) or "-" for t in targets]
    moved_w = max(len("moved"), *(len(m) for m in moved))
    room = max(8, width - status_w - moved_w - 4)
    lines = [fit(f"{'status':<{status_w}}  {'moved':<{moved_w}}  path", width)]
    for target, what in zip(targets, moved, strict=True):
        path = target.path if len(target.path) <= room else "…" + target.path[-(room - 1):]
        state = "failed" if target.status == STALE else \
            "ok" if target.status == "current" else ""
        status = paint(f"{target.status:<{status_w}}", state)
        lines.append(f"{status}  {what:<{moved_w}}  {path}")
    return lines
