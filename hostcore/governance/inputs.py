"""The governing inputs of a file, resolved at its governance point.

A target's governance point is the chain of folders from its repository's root
(the nearest ancestor holding ``.git``) down to the folder holding it. Every
plugin's ``hostcore_governance_inputs`` is asked once per folder on that chain for
the members it vouches for in that folder, by component; a folder's governance is
its parent's plus its own, and the members of one component are folded into its
identity with :func:`hostcore.export.ref.fold`. So an override in a folder between
the target and the root moves the target, and a file in a sibling folder never does.

A component a plugin cannot read now (an instruction file that is a FIFO, a
folder, a dangling symlink, or refuses to be read) is ``None``: *unknown*, which
the gate never counts as current.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hostcore.digests import sha256
from hostcore.errors import HostcoreError
from hostcore.export.ref import GOVERNANCE, IDENTITY_MAX_CHARS, fold
from hostcore.plugin.calls import callers, failed, guarded

if TYPE_CHECKING:
    from hostcore.host import Host

HOOK = "hostcore_governance_inputs"
# How much of a governing file one read takes while it is hashed.
_CHUNK = 1 << 16
# The built-in plugin's name: its members are keyed as it gives them; every other
# plugin's are prefixed with its name, so two plugins never collide on a member.
BUILTIN = "hostcore.governance.plugin"
# What a repository's root holds: a folder for a clone, a file for a worktree.
REPO_MARKER = ".git"

# One component's members: {member name: digest}.
Members = dict[str, str]
# What one implementation returns: component -> members, or None when the component
# cannot be read now.
Contribution = Mapping[str, Mapping[str, str] | None]


class OutsideRepository(HostcoreError):
    """A path lies in no git repository (no ancestor holds ``.git``)."""


class Governance(msgspec.Struct, frozen=True, kw_only=True):
    """The governance over one target, as a stamp or verdict keeps it: each
    component's identity ("" when nothing vouches for it), the components that could
    not be read, and which plugins contributed to which component (so a plugin
    failing later is known to leave exactly those unknown)."""

    identities: dict[str, str]
    unknown: tuple[str, ...] = ()
    contributors: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


def repository_root(folder: Path, *, named: Path | None = None) -> Path:
    """The nearest folder at or above ``folder`` holding ``.git``.

    Raises :class:`OutsideRepository` naming ``named`` (default ``folder``), the
    path the person gave, when there is none.
    """
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / REPO_MARKER):
            return candidate
    raise OutsideRepository(f"{named or folder} is in no git repository (no folder above "
                            f"it holds {REPO_MARKER}); the gate governs files of a repository")


def file_digest(path: str | Path) -> str | None:
    """SHA-256 hex of the regular file at ``path``; ``""`` when nothing is there;
    ``None`` when something is there that cannot be read as a file (a folder, a FIFO,
    a dangling symlink, a permission refused)."""
    # lstat first: most names asked for are absent, and that is then one call.
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    if stat.S_ISLNK(found.st_mode):
        try:
            found = os.stat(path)
        except OSError:
            # A symlink pointing nowhere is there, and says nothing: unknown, not absent.
            return None
    if not stat.S_ISREG(found.st_mode):
        return None  # never opened: a FIFO would block the gate
    try:
        with open(path, "rb") as handle:
            digest = sha256()
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError:
        return None


class Resolver:
    """Resolves governance at folders for one command, each folder once.

    The governance at a folder is its parent's combined with what every plugin
    vouches for in the folder itself, so a check of 10,000 files in 1,000 folders
    asks each plugin once per folder on their paths, and never once per file.
    Plugins that raise are recorded failed (:mod:`hostcore.plugin.calls`) and
    named in :attr:`failed_plugins`; what they vouched for is unknown from then on.
    """

    def __init__(self, host: Host) -> None:
        self._host = host
        self._cache: dict[str, Folder] = {}
        self._roots: dict[str, Path] = {}
        self.failed_plugins: dict[str, str] = {}  # name -> why, for the command to say
        # Listed once: a plugin that fails is unregistered, and its caller then
        # calls nothing, so the list stays right.
        self._callers = list(callers(host.plugins, HOOK, order="registration"))

    def at(self, folder: str, repo_root: str) -> Folder:
        """The governance in force at ``folder`` (absolute) of the repository at
        ``repo_root``; paths as text, since a check asks once per target."""
        found = self._cache.get(folder)
        if found is None:
            parent = os.path.dirname(folder)
            above = None if folder == repo_root or parent == folder \
                else self.at(parent, repo_root)
            found = self._cache[folder] = Folder.below(above, self._own(folder, repo_root))
        return found

    def _own(self, folder: str, repo_root: str) -> _Own:
        """What every plugin vouches for in ``folder`` itself."""
        plugins = self._host.plugins
        own = _Own()
        # One Path per folder and per root, not per plugin and folder.
        target_dir = Path(folder)
        root = self._roots.get(repo_root)
        if root is None:
            root = self._roots[repo_root] = Path(repo_root)
        for name, call in self._callers:
            ok, result = guarded(plugins, name, HOOK, call, target_dir=target_dir,
                                 repo_root=root, host=self._host)
            if not ok:
                self.failed_plugins[name] = _why(plugins.infos.get(name))
                continue
            try:
                # pluggy answers a hook that is not firstresult with a list, here of
                # this plugin's one implementation's result (none when it returned None).
                contribution = _merged([_checked(one) for one in result])
            except ValueError as exc:
                failed(plugins, name, HOOK, exc)
                self.failed_plugins[name] = str(exc)
                continue
            own.add(name, contribution)
        return own


class _Own:
    """The members plugins vouch for in one folder, by component."""

    def __init__(self) -> None:
        self.members: dict[str, Members] = {}
        self.decisions: dict[str, dict[str, str]] = {}  # ref -> plugin -> digest
        self.unknown: set[str] = set()
        self.contributors: dict[str, set[str]] = {}

    def add(self, plugin: str, contribution: Contribution) -> None:
        for component, given in contribution.items():
            self.contributors.setdefault(component, set()).add(plugin)
            if given is None:
                self.unknown.add(component)
            elif component == "decisions":
                for ref, digest in given.items():
                    self.decisions.setdefault(ref, {})[plugin] = digest
            else:
                into = self.members.setdefault(component, {})
                for member, digest in given.items():
                    into[member if plugin == BUILTIN else f"{plugin}:{member}"] = digest


    def adds_nothing_to(self, above: Folder) -> bool:
        """Whether the governance below ``above`` with these members is ``above``'s:
        no member, decision or unknown, and no contributor it does not already name."""
        return (not self.decisions and not self.unknown
                and not any(self.members.values())
                and all(component in above.contributors
                        and who <= frozenset(above.contributors[component])
                        for component, who in self.contributors.items()))


class Folder:
    """The governance in force at one folder, before it is narrowed to a target's work
    item. Folders below one share what they do not add to (its decisions, mostly)."""

    __slots__ = ("_narrowed", "contributors", "decisions", "identities", "members", "unknown")

    def __init__(self, members: dict[str, Members], decisions: dict[str, dict[str, str]],
                 unknown: frozenset[str], contributors: dict[str, frozenset[str]]) -> None:
        self.members = members
        self.decisions = decisions
        self.unknown = tuple(c for c in GOVERNANCE if c in unknown)
        self.contributors = {c: tuple(sorted(contributors[c]))
                             for c in GOVERNANCE if c in contributors}
        # A component someone contributed to is a claim, even with no member (an
        # empty fold): a CLAUDE.md added later then moves it.
        self.identities = {c: fold(members.get(c, {}))
                           if c in contributors and c not in unknown else ""
                           for c in GOVERNANCE if c != "decisions"}
        self._narrowed: dict[str | None, Governance] = {}

    @classmethod
    def below(cls, above: Folder | None, own: _Own) -> Folder:
        """The governance at a folder: ``above`` (its parent's; ``None`` at the root)
        with the folder's own members added, an unknown above staying unknown."""
        if above is None:
            return cls(own.members, own.decisions, frozenset(own.unknown),
                       {c: frozenset(w) for c, w in own.contributors.items()})
        if own.adds_nothing_to(above):
            # Most folders hold no instruction file: sharing the parent's object lets
            # the gate compare each distinct governance once, not once per folder.
            return above
        members = {c: {**above.members.get(c, {}), **own.members.get(c, {})}
                   if c in own.members else above.members[c]
                   for c in above.members.keys() | own.members.keys()}
        decisions = above.decisions
        if own.decisions:
            decisions = {**above.decisions}
            for ref, given in own.decisions.items():
                decisions[ref] = {**decisions.get(ref, {}), **given}
        contributors = {c: frozenset(above.contributors.get(c, ()))
                        | own.contributors.get(c, set())
                        for c in above.contributors.keys() | own.contributors.keys()}
        return cls(members, decisions, frozenset(above.unknown) | own.unknown, contributors)

    def for_item(self, item: str | None) -> Governance:
        """This governance for a target written for work item ``item``: its decisions
        are that item's alone ("" when the item is unknown: no claim either way)."""
        found = self._narrowed.get(item)
        if found is None:
            found = self._narrowed[item] = self._narrow(item)
        return found

    def _narrow(self, item: str | None) -> Governance:
        identities = dict(self.identities)
        if item is None or "decisions" in self.unknown or "decisions" not in self.contributors:
            identities["decisions"] = ""
        else:
            given = self.decisions.get(item, {})
            identities["decisions"] = fold({item if plugin == BUILTIN else f"{plugin}:{item}":
                                            digest for plugin, digest in given.items()})
        return Governance(identities=identities, unknown=self.unknown,
                          contributors=self.contributors)


def _why(info: Any) -> str:
    return str(getattr(info, "error", "") or "raised")


def _merged(contributions: list[Contribution]) -> Contribution:
    if len(contributions) == 1:
        return contributions[0]
    merged: dict[str, dict[str, str] | None] = {}
    for contribution in contributions:
        for component, given in contribution.items():
            before = merged.get(component, {})
            merged[component] = None if given is None or before is None \
                else {**before, **given}
    return merged


def _checked(result: object) -> Contribution:
    """``result`` of one implementation, checked: ``None`` or a mapping of governance
    components to ``None`` or to ``{member: digest}`` of text; ``ValueError`` else."""
    if result is None:
        return {}
    if not isinstance(result, Mapping):
        raise ValueError(f"{HOOK} returned {type(result).__name__}, not a mapping of "
                         "components to members")
    for component, given in result.items():
        if component not in GOVERNANCE:
            raise ValueError(f"{HOOK} returned component {str(component)[:80]!r}; the "
                             f"components are {', '.join(GOVERNANCE)}")
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise ValueError(f"{HOOK}: {component} is {type(given).__name__}, not a mapping "
                             "of members to digests")
        for member, digest in given.items():
            if not isinstance(member, str) or not isinstance(digest, str):
                raise ValueError(f"{HOOK}: {component} members and digests must be text")
            if len(digest) > IDENTITY_MAX_CHARS or any(c in member + digest for c in "\0\n"):
                raise ValueError(f"{HOOK}: {component} member {member[:80]!r}: a digest of "
                                 f"at most {IDENTITY_MAX_CHARS} characters, and no NUL or "
                                 "newline in either")
    return result
