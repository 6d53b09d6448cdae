"""Built-in, loaded by ``hostcore hook`` only: the staleness gate in an agent's loop.

Its ``hostcore_agent_gate``:

* at a PostToolUse of a file-writing tool (``event.written``), stamps each file it
  wrote with the event's session (:func:`hostcore.governance.gate.stamp_targets`).
  A file in no repository, or gone by the time the hook runs, is skipped and
  counted (:data:`OUTSIDE_REPOSITORY`, :data:`TARGET_GONE`); the others are stamped;
* at a Stop, checks the files this session stamped; when any is stale it asks the
  agent to keep working with a message naming each (repository-relative) and what
  moved, so the model sees which rule changed under which file.

``gate = false`` in ``[plugins.governance]`` turns the Stop check off; the stamps
are still made, so ``hostcore check`` keeps reporting. The gate module (SQLite,
the digests) is imported only at those two events, the only ones it declares
(:data:`WRITING_TOOLS`): the hook's dispatcher builds no host for it at any other.
"""

from __future__ import annotations

import collections
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.plugin.gate import GateVerdict
from hostcore.plugin.interest import agent_interest
from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.governance.gate import TargetStatus
    from hostcore.host import Host

# The fault kinds of files a PostToolUse names but that cannot be stamped.
OUTSIDE_REPOSITORY = "stamp_outside_repository"
TARGET_GONE = "stamp_target_gone"


class GateSetting(msgspec.Struct, kw_only=True):
    """The gate's own key of ``[plugins.governance]`` (the table's other keys are the
    inputs', read by :mod:`hostcore.governance.plugin`)."""

    gate: bool = True


# What the hook's dispatcher builds the host for (hostcore.plugin.interest): a Read or
# a Bash call costs this gate nothing. The tools are hostcore.agents.written's, which
# this domain may not import at module level (tests/test_agent_hook_dispatch.py checks).
WRITING_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch")


@hookimpl
@agent_interest("PostToolUse", "Stop", tools=WRITING_TOOLS)
def hostcore_agent_gate(event: AgentEvent, host: Host) -> GateVerdict | None:
    try:
        if event.name == "PostToolUse" and event.written:
            return stamp_written(host, event)
        if event.name == "Stop" and host.plugin_config("governance", GateSetting).gate:
            return stop_verdict(host, event.session_id)
    except Exception:
        # The agents domain counts this as its gate_failed and lets the agent go on;
        # counted here too, so the gate's own status shows that it could not judge.
        _count_gate_failed(host)
        raise
    return None


def _count_gate_failed(host: Host) -> None:
    from hostcore.governance import faults

    # The store may be what failed: a count that cannot be kept is left to the
    # agents domain's, which has its own file.
    with contextlib.suppress(Exception):
        faults.note(host.root, {faults.GATE_FAILED: 1})


def stamp_written(host: Host, event: AgentEvent) -> GateVerdict | None:
    """Stamp the files ``event`` wrote; a verdict carrying the kinds of those skipped."""
    # Imported here: only a file-writing tool's PostToolUse pays for the gate.
    from hostcore.governance import faults as counted
    from hostcore.governance.gate import BadTarget, stamp_targets
    from hostcore.governance.inputs import OutsideRepository, repository_root

    faults: list[str] = []
    files: list[Path] = []
    for written in event.written:
        path = Path(written)
        try:
            repository_root(Path(os.path.abspath(path)).parent)
        except OutsideRepository:
            faults.append(OUTSIDE_REPOSITORY)
            continue
        if not path.is_file():
            faults.append(TARGET_GONE)
            continue
        files.append(path)
    try:
        if files:
            stamp_targets(host, files, session=event.session_id)
    except BadTarget:
        # A file went between the look above and the stamp: stamp the rest one by one.
        for path in files:
            try:
                stamp_targets(host, [path], session=event.session_id)
            except BadTarget:
                faults.append(TARGET_GONE)
    if faults:
        counted.note(host.root, collections.Counter(faults))
    return GateVerdict(faults=tuple(faults)) if faults else None


def stop_verdict(host: Host, session: str) -> GateVerdict | None:
    """A verdict asking the agent to keep working when a file ``session`` stamped is
    stale; ``None`` when every one is current."""
    from hostcore.governance.gate import STALE, check_targets

    stale = [t for t in check_targets(host, session=session) if t.status == STALE]
    return GateVerdict(keep_working=stale_message(stale)) if stale else None


def stale_message(stale: list[TargetStatus]) -> str:
    """What the model reads: each stale file, repository-relative, with what moved (or
    that it is gone), and the two ways to clear it."""
    from hostcore.governance.gate import TARGET

    lines = ["hostcore: the governance of files you wrote in this session changed after "
             "you wrote them (the instructions, terms or decisions that apply to them):"]
    for target in stale:
        what = ("deleted since you wrote it" if TARGET in target.moved
                else f"{', '.join(target.moved)} moved")
        lines.append(f"- {relative(target.path)}: {what}")
    lines.append("Review each against what governs it now and rewrite it, or, if it "
                 "still holds, run `hostcore approve PATH`; then finish.")
    return "\n".join(lines)


def relative(path: str) -> str:
    """``path`` relative to its repository's root (a deleted file's too: the root is
    found by its folders' names)."""
    from hostcore.governance.inputs import OutsideRepository, repository_root

    try:
        return os.path.relpath(path, repository_root(Path(path).parent))
    except OutsideRepository:
        return path
