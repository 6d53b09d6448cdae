"""The staleness gate: stamp a target, approve it, check it against governance now.

A target's *basis* is what vouches for it: its approval when that is newer than
its stamp, else its stamp. :func:`check_targets` compares the basis with the
governance in force at the target's governance point through
:func:`hostcore.export.ref.compare`, so the gate and every other surface agree on
what moved. A component that cannot be read, now or when the basis was taken, or
that a plugin which raised had vouched for, is never current: it is listed as
moved, and the target is ``stale``. A stamped target deleted since is ``stale``
with ``target`` moved: nothing is left that the basis vouches for.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.errors import HostcoreError
from hostcore.export.ref import GOVERNANCE, Ref, compare
from hostcore.governance import faults
from hostcore.governance.inputs import Folder, Governance, Resolver, repository_root
from hostcore.governance.stamps import APPROVED, REJECTED, STAMP, VERDICT, Basis, Entry, New, Stamps
from hostcore.timestamps import format_utc, utc_now

if TYPE_CHECKING:
    from hostcore.host import Host

CURRENT = "current"
STALE = "stale"
UNSTAMPED = "unstamped"
# What `moved` names for a stamped target that no longer exists.
TARGET = "target"


class TargetStatus(msgspec.Struct, frozen=True):
    """One target's verdict at the gate: ``status`` is ``current``, ``stale`` or
    ``unstamped``; ``moved`` names the components the basis no longer matches
    (``context``, ``terms``, ``decisions``, or ``target`` when it was deleted)."""

    path: str
    status: str
    moved: tuple[str, ...] = ()


class BadTarget(HostcoreError):
    """A path the gate cannot govern: not a regular file, or in no repository.
    Nothing was recorded; the message names every such path."""


class Checked(msgspec.Struct, frozen=True, kw_only=True):
    """The statuses of a check, the plugins whose inputs failed during it, and the
    faults counted (kind -> how many, :mod:`hostcore.governance.faults`)."""

    targets: list[TargetStatus]
    failed_plugins: dict[str, str]
    faults: dict[str, int] = msgspec.field(default_factory=dict)


def stamp_targets(host: Host, paths: Sequence[Path], *, session: str | None = None,
                  item: str | None = None) -> list[TargetStatus]:
    """Record, for each of ``paths`` (existing regular files), the governance in force
    at its governance point as its producer's basis, replacing an earlier stamp.

    Returns each target's status under that stamp: ``current``, or ``stale``
    naming the components that cannot be read now. Raises :class:`BadTarget`
    naming every path that is no regular file or lies in no repository (then
    nothing is recorded).
    """
    targets = _files(paths)
    resolver = Resolver(host)
    new = [New(path=path, repo=repo, governance=resolver.at(os.path.dirname(path), repo)
               .for_item(item), session=session, item=item) for path, repo in targets]
    with _store(host) as store:
        store.record(STAMP, new, format_utc(utc_now()))
    judge = _Judge(resolver.failed_plugins)
    statuses = [judge.status(n.path, n.governance, n.governance) for n in new]
    _note(host, judge.faults())
    return statuses


def approve_targets(host: Host, paths: Sequence[Path], *, reject: bool = False
                    ) -> list[TargetStatus]:
    """Record a verdict on each of ``paths`` under the governance in force now.

    An approval vouches for the target as it is under that governance, so it
    clears the gate without being rewritten; a rejection (``reject``) vouches for
    nothing, so the producer's stamp stands. Returns each target's status after.
    """
    targets = _files(paths)
    resolver = Resolver(host)
    with _store(host) as store:
        known = store.entries(path for path, _ in targets)
        items = {p: e.stamp.item for p, e in known.items() if e.stamp is not None}
        new = [New(path=path, repo=repo,
                   governance=resolver.at(os.path.dirname(path), repo).for_item(items.get(path)),
                   item=items.get(path), verdict=REJECTED if reject else APPROVED)
               for path, repo in targets]
        store.record(VERDICT, new, format_utc(utc_now()))
        entries = store.entries(n.path for n in new)
    statuses, counted = _judge([entries.get(n.path) or Entry(path=n.path) for n in new],
                               resolver)
    _note(host, counted)
    return statuses


def check_targets(host: Host, paths: Sequence[Path] | None = None, *,
                  session: str | None = None, repo: Path | None = None
                  ) -> list[TargetStatus]:
    """Each target's status against the governance in force now.

    ``paths``: those targets (one never stamped is ``unstamped``; a folder stands
    for every stamped target below it); else every stamped target of ``repo``
    (default: the repository of the working folder), or, with ``session`` and no
    ``repo``, every target that session stamped. With ``session``, only targets
    whose latest stamp that session made are checked.
    """
    return check(host, paths, session=session, repo=repo).targets


def check(host: Host, paths: Sequence[Path] | None = None, *, session: str | None = None,
          repo: Path | None = None) -> Checked:
    """:func:`check_targets`, with the plugins whose inputs failed (for the CLI to name)."""
    resolver = Resolver(host)
    # One snapshot for every read: a writer committing between two of them would
    # otherwise have some targets judged by their old basis, the rest by the new.
    with _store(host, read_only=True) as store, store.snapshot():
        if paths is not None:
            wanted = [path for path, _ in _located(paths)]
            folders = {p for p in wanted if os.path.isdir(p)}
            found = store.entries(p for p in wanted if p not in folders)
            for folder in sorted(folders):  # a folder stands for the stamped targets below it
                found.update(store.under(folder))
            listed = [*(p for p in wanted if p not in folders), *sorted(found)]
            entries = [found.get(p) or Entry(path=p) for p in dict.fromkeys(listed)]
        elif session is not None and repo is None:
            entries = list(store.stamped_by(session).values())
        else:
            where = repository_root(Path(_absolute(repo if repo is not None else Path.cwd())))
            entries = list(store.in_repository(str(where)).values())
    if session is not None:
        entries = [e for e in entries if e.stamp is not None and e.stamp.session == session]
    statuses, counted = _judge(entries, resolver)
    _note(host, counted)
    return Checked(targets=statuses, failed_plugins=dict(resolver.failed_plugins),
                   faults=counted)


def forget_targets(host: Host, paths: Sequence[Path]) -> int:
    """Drop the stamps and verdicts of ``paths`` (deleted targets too); how many had any."""
    with _store(host) as store:
        return store.forget(_absolute(path) for path in paths)


def _note(host: Host, counted: Mapping[str, int]) -> None:
    # A reporting command's host creates nothing: its faults go only into a store
    # that exists (there is one whenever there was a stamp to judge).
    faults.note(host.root, counted, read_only=host.read_only)


def _judge(entries: Iterable[Entry], resolver: Resolver
           ) -> tuple[list[TargetStatus], dict[str, int]]:
    # Every folder is resolved before any target is judged, so a plugin that fails
    # at the last folder leaves unknown what it vouched for at the first one too.
    judged: list[tuple[str, Basis | None, Folder | None]] = []
    for entry in entries:
        basis = entry.basis()
        if basis is None or not os.path.lexists(entry.path):
            judged.append((entry.path, basis, None))
            continue
        judged.append((entry.path, basis,
                       resolver.at(os.path.dirname(entry.path), basis.repo)))
    judge = _Judge(resolver.failed_plugins)
    statuses = []
    for path, basis, folder in judged:
        if basis is None:
            statuses.append(TargetStatus(path, UNSTAMPED))
        elif folder is None:
            statuses.append(TargetStatus(path, STALE, (TARGET,)))
        else:
            statuses.append(judge.status(path, basis.governance, folder.for_item(basis.item)))
    return statuses, judge.faults()


class _Judge:
    """Compares bases with governance now. Thousands of targets share a few of each
    (one decoded basis per stored governance, one governance per folder and work
    item), so each pair of objects is compared once."""

    def __init__(self, failed: Mapping[str, str]) -> None:
        self._failed = tuple(failed)
        # Keyed by identity: both objects outlive the judging (the entries and the
        # resolver's folders hold them), so an id is never reused meanwhile.
        self._seen: dict[tuple[int, int], tuple[str, ...]] = {}
        self._unknown = 0  # targets judged with a governing input that could not be read

    def status(self, path: str, basis: Governance, now: Governance) -> TargetStatus:
        key = (id(basis), id(now))
        moved = self._seen.get(key)
        if moved is None:
            moved = self._seen[key] = self._moved(basis, now)
        if basis.unknown or now.unknown:
            self._unknown += 1
        return TargetStatus(path, STALE if moved else CURRENT, moved)

    def faults(self) -> dict[str, int]:
        """What kept this judging from a full answer, by fault kind."""
        return {faults.INPUT_UNKNOWN: self._unknown, faults.INPUT_FAILED: len(self._failed)}

    def _moved(self, basis: Governance, now: Governance) -> tuple[str, ...]:
        moved = set(compare(_ref(basis), _ref(now)).moved())
        moved.update(basis.unknown, now.unknown)
        for plugin in self._failed:
            vouched = [c for c, who in basis.contributors.items() if plugin in who]
            # A plugin that raised and had vouched for nothing here may have been about
            # to vouch for anything: no component can be called current.
            moved.update(vouched or GOVERNANCE)
        return tuple(c for c in GOVERNANCE if c in moved)


def _ref(governance: Governance) -> Ref:
    ids = governance.identities
    return Ref(context=ids.get("context", ""), terms=ids.get("terms", ""),
               decisions=ids.get("decisions", ""))


def _absolute(path: Path, folders: dict[str, str] | None = None) -> str:
    """``path`` absolute, its folders resolved: two spellings of one file meet at one
    stamp, and a deleted target still has a name to be found by. ``folders`` keeps
    each folder resolved once, for a call naming many files in few folders. Text,
    not pathlib: a stamp of 10,000 files would spend more on Path objects than on I/O."""
    folder, name = os.path.split(os.path.abspath(path))
    known = None if folders is None else folders.get(folder)
    if known is None:
        known = os.path.realpath(folder)
        if folders is not None:
            folders[folder] = known
    return os.path.join(known, name)


def _located(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """Each path made absolute with its repository's root; :class:`BadTarget` naming
    every path in no repository."""
    located, bad = [], []
    folders: dict[str, str] = {}
    roots: dict[str, str] = {}
    for given in paths:
        path = _absolute(given, folders)
        # A folder (`check .` at the top) is looked for from itself, a file from its own.
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        try:
            root = roots.get(folder)
            if root is None:
                root = roots[folder] = str(repository_root(Path(folder), named=given))
            located.append((path, root))
        except HostcoreError as exc:
            bad.append(str(exc))
    if bad:
        raise BadTarget("; ".join(bad))
    return located


def _files(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """:func:`_located`, each also an existing regular file."""
    located = _located(paths)
    bad = [f"{path}: {why}" for path, _ in located if (why := _not_a_file(path))]
    if bad:
        raise BadTarget("; ".join(bad))
    return located


def _not_a_file(path: str) -> str | None:
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return None
    except FileNotFoundError:
        return "no such file" if not os.path.lexists(path) else "a dangling symlink"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return "not a regular file"


def _store(host: Host, *, read_only: bool = False) -> contextlib.closing[Stamps]:
    """The root's stamp store for one call, closed after it."""
    return contextlib.closing(Stamps(host.root, read_only=read_only or host.read_only))
