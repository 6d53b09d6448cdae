"""The host's three built-in withholding-policy inputs.

* :class:`ClassList` — the machine-local class-per-entry list: directories marked
  ``full`` or ``local-only``; the longest entry on path boundaries decides.
  Fingerprint part: SHA-256 of the file's bytes (no path enters the digest).
* :class:`SyncOptOut` — source ids whose client opted out of sync.
  Fingerprint part: SHA-256 of the sorted ids.
* :class:`IgnoreDotfiles` — a ``.hostcoreignore`` file in a directory or any
  ancestor marks it local-only. Fingerprint part: a digest of the folders holding
  one on the paths of the store's directories (no path shows in it), re-checked
  at most every :data:`IGNORE_TTL_SECONDS`, a long-running process looking only
  at the folders where an entry came or went.

Both files are read again only when their stat (inode, size, mtime_ns) changes,
so a change written by another process takes effect at the next read of the
fingerprint (readers check it between chunks), and an unchanged file costs one
``stat`` per check.

An input whose state file exists but cannot be read or parsed withholds every
row until it is fixed (its ``status()`` says why): when in doubt, nothing leaves.
File formats are in ``docs/evidence.md``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from hostcore.errors import HostcoreError
from hostcore.evidence.paths import ancestors, normalize_dir
from hostcore.export.ref import identity, sha256_hex
from hostcore.files import atomic_write, file_lock

if TYPE_CHECKING:
    from hostcore.evidence.folder_watch import FolderWatch

CLASS_LIST_FILE = "policy/classes.tsv"
OPT_OUT_FILE = "policy/sync-opt-out.json"
IGNORE_FILE_NAME = ".hostcoreignore"
CLASSES = ("full", "local-only")
# How long one directory's dotfile verdict is trusted before its folders are
# looked at again (seconds): the bound on how late a new .hostcoreignore is seen.
IGNORE_TTL_SECONDS = 2.0

# No version read yet (or none offered): the directories are read each check.
_UNREAD = object()
_MISSING = (errno.ENOENT, errno.ENOTDIR)

_CLASS_LIST_HEADER = (
    b"# hostcore class-per-entry list (written by `hostcore policy`).\n"
    b"# One entry per line: <class>\\t<directory>; class is full or local-only.\n"
)

Clock = Callable[[], float]


class PolicyStateError(Exception):
    """A policy state file exists but cannot be read or parsed."""


def _locked(path: Path) -> contextlib.AbstractContextManager[None]:
    """Serialise read-modify-write of one policy file across processes."""
    return file_lock(path.parent / f".{path.name}.lock")


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file without reading it; ``None`` when it is missing."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return (-1, -1, -1)  # unreadable: re-read, which records why
    return (found.st_ino, found.st_size, found.st_mtime_ns)


class ClassList:
    """The class-per-entry list at ``<root>/policy/classes.tsv``."""

    name = "class-list"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._loaded = False
        self._stat: tuple[int, int, int] | bool | None = False  # False: never read
        self._part = ""
        self._digest: str | None = None
        self._entries: dict[str, str] = {}
        self._error: str | None = None
        self._by_directory: dict[str, bool] = {}

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            self._error = f"{self.path}: cannot read: {exc.strerror or exc}"
            return None

    def _refresh(self) -> str:
        """Read the file if its stat changed; re-parse only when its bytes changed.
        Returns the part."""
        stat = _stat_key(self.path)
        if self._loaded and stat == self._stat and stat != (-1, -1, -1):
            return self._part
        self._stat = stat
        self._part = self._reread()
        return self._part

    def _reread(self) -> str:
        self._loaded = True
        data = self._read()
        if data is None:
            self._digest = None
            self._by_directory.clear()
            return "unreadable"
        digest = sha256_hex(data)
        if digest != self._digest:
            self._digest = digest
            self._by_directory.clear()
            try:
                self._entries = _parse_class_list(data, self.path)
                self._error = None
            except PolicyStateError as exc:
                self._entries = {}
                self._error = str(exc)
        return digest

    def fingerprint_part(self) -> str:
        return self._refresh()

    def withholds(self, directory: str, source_id: str) -> bool:
        if not self._loaded:
            self._refresh()
        if self._error is not None:
            return True
        verdict = self._by_directory.get(directory)
        if verdict is None:
            verdict = self._by_directory[directory] = self.class_of(directory) == "local-only"
        return verdict

    def class_of(self, directory: str) -> str | None:
        """The class of the longest entry covering ``directory`` (``None``: no entry)."""
        for candidate in ancestors(normalize_dir(directory)):
            found = self._entries.get(candidate)
            if found is not None:
                return found
        return None

    def entries(self) -> list[tuple[str, str]]:
        """(directory, class) as written in the file, sorted by directory."""
        self._refresh()
        if self._error is not None:
            raise PolicyStateError(self._error)
        return sorted(self._raw_entries().items())

    def _raw_entries(self) -> dict[str, str]:
        data = self._read()
        return _parse_class_list(data or b"", self.path, raw=True)

    def set(self, directory: str, class_: Literal["full", "local-only"]) -> None:
        """Add or change the entry for ``directory`` and rewrite the file atomically.

        The file is written in a canonical form (sorted by directory), so moving an
        entry back restores the earlier bytes, and with them the earlier fingerprint.
        """
        if class_ not in CLASSES:
            raise ValueError(f"class {class_!r}: expected one of {', '.join(CLASSES)}")
        if not directory or "\t" in directory or "\n" in directory:
            raise ValueError(f"directory {directory!r}: must be non-empty, without tabs "
                             "or newlines")
        with _locked(self.path):
            if self.path.exists() and self._read() is None:
                raise PolicyStateError(self._error or f"{self.path}: cannot read")
            entries = self._raw_entries()
            entries[directory] = class_
            body = b"".join(f"{cls}\t{path}\n".encode() for path, cls in sorted(entries.items()))
            atomic_write(self.path, _CLASS_LIST_HEADER + body)
        self._refresh()

    def remove(self, directory: str) -> str | None:
        """Drop the entry for ``directory`` (as written); returns its class, or
        ``None`` when there was none (and the file is left untouched)."""
        with _locked(self.path):
            if self.path.exists() and self._read() is None:
                raise PolicyStateError(self._error or f"{self.path}: cannot read")
            entries = self._raw_entries()
            class_ = entries.pop(directory, None)
            if class_ is not None:
                body = b"".join(f"{cls}\t{path}\n".encode()
                                for path, cls in sorted(entries.items()))
                atomic_write(self.path, _CLASS_LIST_HEADER + body)
        self._refresh()
        return class_

    def status(self) -> dict[str, object]:
        self._refresh()
        report: dict[str, object] = {"entries": len(self._entries)}
        if self._error is not None:
            report["error"] = self._error
        return report


def _parse_class_list(data: bytes, path: Path, *, raw: bool = False) -> dict[str, str]:
    """Entries keyed by normalised directory (or as written, when ``raw``)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyStateError(f"{path}: not UTF-8 ({exc.reason})") from None
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        class_, sep, directory = line.partition("\t")
        if not sep or class_ not in CLASSES or not directory:
            raise PolicyStateError(f"{path}:{number}: expected '<full|local-only>\\t<directory>'")
        entries[directory if raw else normalize_dir(directory)] = class_
    return entries


class SyncOptOut:
    """Source ids whose client opted out of sync, at ``<root>/policy/sync-opt-out.json``
    (a JSON list of strings), read again whenever the file's stat changes."""

    name = "sync-opt-out"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._stat: tuple[int, int, int] | bool | None = False  # False: never read
        self._ids: frozenset[str] = frozenset()
        self._part = ""
        self._error: str | None = None

    def _current(self) -> frozenset[str]:
        stat = _stat_key(self.path)
        if stat != self._stat or stat == (-1, -1, -1):
            self._stat = stat
            self._load()
        return self._ids

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b"[]"
        except OSError as exc:
            self._fail(f"{self.path}: cannot read: {exc.strerror or exc}", b"")
            return
        try:
            ids = msgspec.json.decode(data, type=list[str])
        except msgspec.DecodeError as exc:
            self._fail(f"{self.path}: expected a JSON list of source ids: {exc}", data)
            return
        if any(_has_control(i) for i in ids):  # what `set` refuses, written by hand
            self._fail(f"{self.path}: a source id holds a control character", data)
            return
        self._ids = frozenset(ids)
        self._error = None
        self._part = identity(*sorted(self._ids))

    def _fail(self, error: str, data: bytes) -> None:
        self._ids = frozenset()
        self._error = error
        self._part = "unreadable:" + sha256_hex(data)

    def fingerprint_part(self) -> str:
        self._current()
        return self._part

    def withholds(self, directory: str, source_id: str) -> bool:
        ids = self._current()
        return self._error is not None or source_id in ids

    def ids(self) -> list[str]:
        """The opted-out source ids, sorted (read fresh from disk)."""
        self._stat = False
        current = sorted(self._current())
        if self._error is not None:
            raise PolicyStateError(self._error)
        return current

    def set(self, source_id: str, opted_out: bool) -> None:
        """Opt ``source_id`` out of sync (or back in) and rewrite the file atomically."""
        if not source_id or _has_control(source_id):
            raise ValueError(f"source id {source_id!r}: must be non-empty, without tabs, "
                             "newlines or other control characters")
        with _locked(self.path):
            ids = set(self.ids())
            if opted_out:
                ids.add(source_id)
            else:
                ids.discard(source_id)
            atomic_write(self.path, msgspec.json.encode(sorted(ids)) + b"\n")
        self._stat = False

    def status(self) -> dict[str, object]:
        ids = self._current()
        report: dict[str, object] = {"opted_out": len(ids)}
        if self._error is not None:
            report["error"] = self._error
        return report


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


class IgnoreDotfiles:
    """Withholds rows recorded in a directory that holds, or has an ancestor that
    holds, a ``.hostcoreignore`` file.

    Each folder's "holds a dotfile" answer is trusted for ``ttl`` seconds. The
    fingerprint part is the identity of the folders holding one among the
    ancestors of every directory ``directories()`` names (the store's scopes),
    re-checked at most every ``ttl`` seconds, so a dotfile added or removed by
    anyone moves the part (and with it the policy fingerprint and the export's
    context identity) within ``ttl``, and every process over the same store and
    folders computes the same part, whatever it happened to read before. Without
    ``directories`` the part covers the folders this instance has been asked
    about. ``version()``, when given, changes whenever ``directories()`` may
    have: the names are read again only then.

    The first check looks at every folder. A process that checks again is a
    long-running one: it watches the folders (:mod:`.folder_watch`) and from then
    on looks only at those where an entry came or went, and at any it could not
    watch, so a check costs what changed, not what the store names.
    """

    name = "ignore-dotfiles"

    def __init__(self, *, ttl: float | None = None, clock: Clock = time.monotonic,
                 directories: Callable[[], Iterable[str]] | None = None,
                 version: Callable[[], object] | None = None) -> None:
        self.ttl = IGNORE_TTL_SECONDS if ttl is None else ttl
        self._clock = clock
        self._directories = directories
        self._version = version
        # folder -> (when looked at, holds a dotfile), for every folder on a path asked.
        self._own: dict[str, tuple[float, bool]] = {}
        self._holding: set[str] = set()
        self._verdicts: dict[str, bool] = {}
        self._checked_at: float | None = None
        self._part = ""  # the first fingerprint_part() computes it
        # The directories last named, and the folders on their paths (kept between
        # re-checks: thousands of scopes change rarely), each folder's own folders
        # among them (to look again below one that moved).
        self._named_version: object = _UNREAD
        self._known: frozenset[str] = frozenset()
        self._folders: frozenset[str] = frozenset()
        self._children: dict[str, list[str]] = {}
        self._watch: FolderWatch | None = None
        self._watch_tried = False
        self._unwatched: set[str] = set()
        self._looked_at: frozenset[str] = frozenset()

    def fingerprint_part(self) -> str:
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= self.ttl:
            first = self._checked_at is None
            self._checked_at = now
            folders = self._folders_to_check()
            if first:
                self._look_at(folders, now)
            elif self._start_watching(folders, now):
                self._look_at(self._to_look_at(folders), now)
            self._looked_at = folders
            self._part = identity(*sorted(self._holding.intersection(folders)))
        return self._part

    def _look_at(self, folders: Iterable[str], now: float) -> None:
        watch = self._watch
        if watch is None:
            for folder in folders:
                self._holds(folder, now, fresh=True)
            return
        # Parents first: whether a missing folder needs looking at depends on its parent.
        for folder in sorted(folders, key=len):
            # Watch before looking: a dotfile made in between raises an event.
            failed = watch.watch(folder)
            if not failed or (failed in _MISSING
                              and watch.watching(os.path.dirname(folder))):
                # A missing folder can only appear as an entry of its watched parent.
                self._unwatched.discard(folder)
            else:
                self._unwatched.add(folder)
            self._holds(folder, now, fresh=True)

    def _start_watching(self, folders: frozenset[str], now: float) -> bool:
        """Start watching ``folders`` on the second check; False when that look is done
        (or there is nothing to watch with, and every folder was looked at)."""
        if self._watch_tried:
            if self._watch is not None:
                return True
            self._look_at(folders, now)
            return False
        self._watch_tried = True
        # Here, not at the top: it loads ctypes (~5 ms), which a one-shot command
        # checking once never needs.
        from hostcore.evidence.folder_watch import FolderWatch

        self._watch = FolderWatch.open()
        self._look_at(folders, now)
        return False

    def _to_look_at(self, folders: frozenset[str]) -> set[str]:
        """The folders a watched check looks at: those where an entry came or went,
        every folder below one made, moved or removed (its path may lead elsewhere
        now), the ones not watched, and the ones new to the check."""
        assert self._watch is not None
        changes = self._watch.changes()
        if changes.overflow:
            return set(folders)
        again = (changes.folders | self._unwatched) & folders
        if folders is not self._looked_at:  # the same names: nothing new, and no O(n) diff
            again |= folders - self._looked_at
        for entry in changes.entries & folders:
            self._below(entry, again)
        return again

    def _below(self, folder: str, into: set[str]) -> None:
        pending = [folder]
        while pending:  # a loop, not recursion: paths can be thousands of levels deep
            current = pending.pop()
            into.add(current)
            pending.extend(self._children.get(current, ()))

    def _folders_to_check(self) -> frozenset[str]:
        if self._directories is None:
            return frozenset(self._own)
        try:
            version = self._version() if self._version is not None else _UNREAD
            if version is not _UNREAD and version == self._named_version:
                return self._folders
            named = frozenset(self._directories())
        except HostcoreError:
            # The store cannot be read now (a full disk, say): nothing can be
            # exported either, so the folders known so far serve until it can.
            return self._folders
        self._named_version = version
        if named != self._known:
            self._known = named
            self._children = {}
            self._folders = frozenset(_ancestors(
                (os.path.normpath(d) for d in named if d and os.path.isabs(d)),
                self._children))
        return self._folders

    def withholds(self, directory: str, source_id: str) -> bool:
        verdict = self._verdicts.get(directory)
        if verdict is None:
            verdict = bool(directory) and os.path.isabs(directory) and self._ignored(
                os.path.normpath(directory), self._clock())
            self._verdicts[directory] = verdict
        return verdict

    def _ignored(self, directory: str, now: float) -> bool:
        # A loop, not recursion: paths can be thousands of levels deep.
        current = directory
        while True:
            if self._holds(current, now):
                return True
            parent = os.path.dirname(current)
            if parent == current:
                return False
            current = parent

    def _holds(self, folder: str, now: float, *, fresh: bool = False) -> bool:
        cached = self._own.get(folder)
        if cached is not None and not fresh and (
                now - cached[0] < self.ttl
                or (self._watch is not None and self._watch.watching(folder))):
            # A watched folder's answer stands until its watch reports a change.
            return cached[1]
        own = os.path.lexists(os.path.join(folder, IGNORE_FILE_NAME))
        if cached is not None and cached[1] != own:
            self._verdicts.clear()  # a dotfile came or went: every verdict below may change
        self._own[folder] = (now, own)
        if own:
            self._holding.add(folder)
        else:
            self._holding.discard(folder)
        return own

    def status(self) -> dict[str, object]:
        return {"cached_directories": len(self._verdicts),
                "ignoring_folders": len(self._holding)}


def _ancestors(directories: Iterable[str], children: dict[str, list[str]]) -> set[str]:
    """Every folder on the paths of ``directories`` (normalised, absolute), them
    included; ``children`` gets each one's folders among them."""
    found: set[str] = set()
    for directory in directories:
        current = directory
        while current not in found:  # a shared ancestor ends the climb
            found.add(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            children.setdefault(parent, []).append(current)
            current = parent
    return found
