"""Built-in: the staleness gate's plugin face.

* the default governing inputs, contributed through ``hostcore_governance_inputs``
  like any plugin's: ``context`` (the agent instruction files on the governance
  point), ``terms`` (the configured terminology files) and ``decisions`` (the
  ledger's decisions, by work item);
* the ``stamp``, ``check`` and ``approve`` commands (defined in
  :mod:`hostcore.governance.commands`).

Configured in ``[plugins.governance]``: ``context_files`` adds instruction file
names to ``CLAUDE.md`` and ``AGENTS.md``; ``terms`` lists terminology files,
relative to the repository's root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    from pathlib import Path

    import click

    from hostcore.host import Host

# The instruction files Claude Code and Codex read in every folder they work in.
CONTEXT_FILES = ("CLAUDE.md", "AGENTS.md")


class GovernanceSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.governance]``."""

    context_files: list[str] = msgspec.field(default_factory=list)
    terms: list[str] = msgspec.field(default_factory=list)


@hookimpl
def hostcore_governance_inputs(target_dir: Path, repo_root: Path, host: Host
                               ) -> dict[str, dict[str, str] | None]:
    settings = host.plugin_config("governance", GovernanceSettings)
    names = tuple(dict.fromkeys((*CONTEXT_FILES, *settings.context_files)))
    return {"context": _context(target_dir, repo_root, names),
            "terms": _terms(repo_root, settings.terms),
            "decisions": host.ledger.decision_members()}


def _context(target_dir: Path, repo_root: Path, names: tuple[str, ...]
             ) -> dict[str, str] | None:
    """The instruction files from the root down to ``target_dir``, keyed by their path
    in the repository; ``None`` when one of them cannot be read."""
    # Imported here: a host loads this plugin on every build, the gate only when used.
    from hostcore.governance.inputs import file_digest, folders_down

    members = {}
    for folder in folders_down(repo_root, target_dir):
        for name in names:
            digest = file_digest(folder / name)
            if digest is None:
                return None
            if digest:
                members[(folder / name).relative_to(repo_root).as_posix()] = digest
    return members


def _terms(repo_root: Path, relatives: list[str]) -> dict[str, str] | None:
    """The configured terminology files that exist; ``None`` when one cannot be read."""
    from hostcore.governance.inputs import file_digest

    members = {}
    for relative in relatives:
        digest = file_digest(repo_root / relative)
        if digest is None:
            return None
        if digest:
            members[relative] = digest
    return members


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # Command code loads only when a plugin command is looked up (RootGroup, cli/app.py).
    from hostcore.governance.commands import approve_command, check_command, stamp_command

    cli.add_command(stamp_command)
    cli.add_command(check_command)
    cli.add_command(approve_command)
