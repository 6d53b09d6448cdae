"""``hostcore capture``: status, ignore, revalidate.

Keys of ``capture status --json`` (stable): ``inventory`` (repositories derived),
``capturing`` (what capture may poll now), ``ignored`` (size of the ignore list),
``revalidation`` (``null``, or ``trigger``, ``unit``, ``positions_read``,
``positions_total``, ``rows_read``, ``tuples_read``, ``confirmed``,
``partitions_done``, ``partitions_total``, ``slices``),
``last_derivation_age_seconds`` (``null`` when never derived; negative when the
derivation is stamped further in the future than a clock may drift, which makes
a pass due), ``pending``, ``rate_limited_for_seconds``. Counts only: no
repository is named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import msgspec

from hostcore.errors import RecordError
from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore.plugin.terminal import refuse, say

if TYPE_CHECKING:
    from hostcore.host import Host
    from hostcore_github_capture.sidecar import TickOutcome
    from hostcore_github_capture.worker import CaptureWorker


def find_worker(host: Host) -> CaptureWorker:
    from hostcore_github_capture.worker import PLUGIN_NAME, CaptureWorker

    for worker in host.workers:
        if worker.name == PLUGIN_NAME and isinstance(worker, CaptureWorker):
            return worker
    raise click.ClickException("the github-capture worker is not registered")


def register(cli: click.Group) -> None:
    cli.add_command(capture_group)


class CaptureGroup(click.Group):
    """Reports a state file that does not decode as an error naming it (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RecordError as exc:
            raise click.ClickException(f"{exc} (left as it is; fix or remove it)") from None


@click.group("capture", cls=CaptureGroup)
def capture_group() -> None:
    """The GitHub capture sidecar: its repository inventory and event capture."""


@capture_group.command("status")
@json_option
@pass_host
def status_command(host: Host, as_json: bool) -> None:
    """Show the inventory's size, revalidation progress, derivation age and pending work."""
    with host.step_lock():
        report = find_worker(host).report()
    if as_json:
        emit_json(report)
        return
    click.echo(f"inventory: {report['inventory']} repositories "
               f"({report['capturing']} capturing, {report['ignored']} ignored)")
    click.echo(f"last derivation: {_age(report['last_derivation_age_seconds'])}")
    progress = report["revalidation"]
    click.echo("revalidation: " + ("none under way" if progress is None else _progress(progress)))
    click.echo(f"pending: {'yes' if report['pending'] else 'no'}")
    if report["rate_limited_for_seconds"]:
        click.echo(f"rate limited for another {report['rate_limited_for_seconds']} s")


@capture_group.command("ignore")
@click.argument("repository")
@click.option("--remove", is_flag=True, help="Take the repository off the ignore list.")
@click.option("--force", is_flag=True,
              help="Ignore it even though the inventory does not hold it (skip the check).")
@json_option
@pass_host
def ignore_command(host: Host, repository: str, remove: bool, force: bool,
                   as_json: bool) -> None:
    """Never capture REPOSITORY (OWNER/REPO or a remote URL) from now on.

    Forward-only: events already stored stay. --remove lets capture resume. A
    repository the inventory does not hold is refused (exit 2) unless --force,
    and so is removing one that is not ignored. Keys of --json: repository,
    ignored, changed.
    """
    from hostcore_github_capture.remotes import parse_repo_argument

    key = parse_repo_argument(repository)
    if key is None:
        raise click.BadParameter(f"{repository!r} is not OWNER/REPO or a GitHub remote URL",
                                 param_hint="REPOSITORY")
    sidecar = find_worker(host).sidecar
    with host.step_lock():
        state = sidecar.state.load()
        if remove and key not in state.ignore:
            refuse(f"{key}: not on the ignore list; nothing changed",
                   "`hostcore capture status` counts what is ignored")
        if not remove and not force and key not in state.repos and key not in state.ignore:
            # A typo would otherwise ignore nothing, and say nothing about it.
            refuse(f"{key}: not in the inventory ({len(state.repos)} repositories derived "
                   "from stored evidence); nothing recorded",
                   "pass --force to ignore it anyway")
        ignore = set(state.ignore) - {key} if remove else set(state.ignore) | {key}
        changed = ignore != set(state.ignore)
        if changed:
            sidecar.state.save(msgspec.structs.replace(state, ignore=sorted(ignore)))
    if as_json:
        emit_json({"repository": key, "ignored": not remove, "changed": changed})
        return
    say(f"{key}: {'no longer ignored' if remove else 'ignored'}"
        + ("" if changed else " (already)"))


@capture_group.command("revalidate")
@json_option
@pass_host
def revalidate_command(host: Host, as_json: bool) -> None:
    """Start a revalidation pass now (or finish the one under way), slice by slice.

    The pass is labelled with the trigger that was already due (a policy change,
    say), and ``requested`` only when none was. Each slice reads at most the
    per-tick budget under the step lock, so a running daemon interleaves with
    it; a progress line follows every slice.
    """
    sidecar = find_worker(host).sidecar
    request = True
    ticks = rows = tuples = 0
    trigger: str | None = None
    while True:
        with host.step_lock():
            outcome: TickOutcome = sidecar.tick(request=request)
            progress = sidecar.progress()
        request = False
        ticks += 1
        rows += outcome.rows_read
        tuples += outcome.tuples_read
        trigger = outcome.started or trigger
        if progress is None:
            break
        trigger = progress.trigger  # the pass under way, whoever started it
        click.echo(f"revalidation: {_progress(msgspec.to_builtins(progress))}", err=True)
    state = sidecar.state.load()
    result = {"ticks": ticks, "trigger": trigger, "rows_read": rows, "tuples_read": tuples,
              "inventory": len(state.repos)}
    if as_json:
        emit_json(result)
    else:
        read = f"{tuples} tuples" if tuples else f"{rows} rows"
        click.echo(f"revalidation complete (trigger: {trigger}): {ticks} slice(s), {read} "
                   f"read, {len(state.repos)} repositories in the inventory")


def _progress(progress: dict[str, Any]) -> str:
    unit = progress["unit"]
    if unit == "rows":
        done = f"{progress['positions_read']}/{progress['positions_total']} positions"
    else:
        done = f"{progress['partitions_done']}/{progress['partitions_total']} partitions"
    return (f"{done}, {progress[f'{unit}_read']} {unit} read, {progress['confirmed']} "
            f"repositories confirmed (trigger: {progress['trigger']})")


def _age(seconds: int | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 0:
        return (f"stamped {-seconds} s in the future (the clock was wrong when it was "
                "written); a pass is due")
    return f"{seconds} s ago"
