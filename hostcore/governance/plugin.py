"""Built-in: the staleness gate's plugin face.

* the default governing inputs, contributed through ``hostcore_governance_inputs``
  like any plugin's: ``context`` (the agent instruction files on the governance
  point), ``terms`` (the configured terminology files) and ``decisions`` (the
  ledger's decisions, by work item);
* the ``stamp``, ``check`` and ``approve`` commands (defined in
  :mod:`hostcore.governance.commands`);
* the ``governance`` worker: its ``status()`` shows the gate's fault counts by kind
  (:mod:`hostcore.governance.faults`), and each tick fails its step naming the
  kinds counted since the last one, so ``run --once`` exits 1 after a fault.

Configured in ``[plugins.governance]``: ``context_files`` adds instruction file
names to ``CLAUDE.md`` and ``AGENTS.md``; ``terms`` lists terminology files,
relative to the repository's root.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from hostcore.errors import HostcoreError
from hostcore.plugin import fault_counts
from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import click

    from hostcore.host import Host
    from hostcore.plugin.registration import WorkerResult

# The instruction files Claude Code and Codex read in every folder they work in.
CONTEXT_FILES = ("CLAUDE.md", "AGENTS.md")
# Where the faults are counted (hostcore.governance.stamps.FILE, held to it by a
# test), spelt here so a tick or a status on a root without a stamp store says "no
# faults" without importing the store's modules (about 1 ms of a cold start).
STAMP_STORE = os.path.join("governance", "stamps.sqlite3")


class GovernanceSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.governance]``."""

    context_files: list[str] = msgspec.field(default_factory=list)
    terms: list[str] = msgspec.field(default_factory=list)
    # Read by the gate's hook face (hostcore.governance.hook): false turns the Stop
    # check off. Declared here too, so a misspelt key is still refused.
    gate: bool = True


class GateFaults(HostcoreError):
    """The gate met faults since the last tick (each target was still answered, an
    unknown one as stale); the message gives the kinds and counts."""


class GovernanceWorker:
    """Reports the gate's faults, once each, and shows their counts."""

    name = "governance"
    order = 990  # after the work of a tick, before agent-hooks' report

    def __init__(self, root: Path) -> None:
        self._root = root

    def run(self, host: Host) -> WorkerResult:
        new: dict[str, int] = {}
        if _has_stamp_store(host.root):
            # Imported here: every host loads this plugin; SQLite only when a tick
            # runs on a root where the gate has counted something.
            from hostcore.governance import faults

            new = faults.take_unreported(host.root)
        return fault_counts.report_new(new, GateFaults, "staleness gate fault(s)",
                                       "`hostcore status` counts them")

    def status(self) -> dict[str, object]:
        if not _has_stamp_store(self._root):
            return fault_counts.status([])
        from hostcore.governance import faults

        return fault_counts.status(faults.faults(self._root))


def _has_stamp_store(root: Path) -> bool:
    return os.path.exists(os.path.join(root, STAMP_STORE))


@hookimpl
def hostcore_workers(host: Host) -> GovernanceWorker:
    return GovernanceWorker(host.root)


@hookimpl
def hostcore_governance_inputs(target_dir: Path, repo_root: Path, host: Host
                               ) -> dict[str, dict[str, str] | None]:
    settings = host.plugin_config("governance", GovernanceSettings)
    names = tuple(dict.fromkeys((*CONTEXT_FILES, *settings.context_files)))
    found = {"context": _context(target_dir, repo_root, names)}
    if target_dir == repo_root:  # the repository's own: said once, at its root
        found["terms"] = _members(str(repo_root), settings.terms)
        found["decisions"] = host.ledger.decision_members()
    return found


def _context(folder: Path, repo_root: Path, names: tuple[str, ...]) -> dict[str, str] | None:
    """The instruction files in ``folder`` itself, keyed by their path in the
    repository; ``None`` when one of them cannot be read."""
    # The folder lies at or below the root (the resolver walks up to it): its path in
    # the repository is a cut, cheaper than os.path.relpath once per folder.
    here, top = str(folder), str(repo_root)
    prefix = "" if here == top else here[len(top.rstrip("/")) + 1:] + "/"
    return _members(here, names, prefix=prefix)


def _members(folder: str, relatives: Sequence[str], *, prefix: str = ""
             ) -> dict[str, str] | None:
    """``{prefix + name: digest}`` of the files that exist; ``None`` when one cannot be
    read. Paths as text: this runs once per folder of a check, pathlib costs more."""
    # Imported here: a host loads this plugin on every build, the gate only when used.
    from hostcore.governance.inputs import file_digest

    members = {}
    for relative in relatives:
        digest = file_digest(os.path.join(folder, relative))
        if digest is None:
            return None
        if digest:
            members[prefix + relative] = digest
    return members


# The commands this plugin adds: name -> ("module:attribute", one-line help).
# hostcore's command line lists them from here and imports a command's module only
# when that command runs (RootGroup, cli/app.py); the hook below gives any other
# group (an embedder's, the conformance kit's) the commands themselves.
DECLARED_COMMANDS = {
    "stamp": ("hostcore.governance.commands:stamp_command",
              "Record the governance in force over each PATH as the basis it was written "
              "under."),
    "check": ("hostcore.governance.commands:check_command",
              "Check each PATH against the governance in force now (exit 1 when one is "
              "stale)."),
    "approve": ("hostcore.governance.commands:approve_command",
                "Vouch for each PATH as it is, under the governance in force now."),
}


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # The command modules load now, when a group asks for them: the host builds this
    # plugin on every start, and commands seldom run.
    add_declared(cli, DECLARED_COMMANDS)
