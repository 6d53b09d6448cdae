"""The host's three built-in withholding-policy inputs.

* :class:`ClassList` — the machine-local class-per-entry list: directories marked
  ``full`` or ``local-only``; the longest entry on path boundaries decides.
  Fingerprint part: SHA-256 of the file's bytes (no path enters the digest).
* :class:`SyncOptOut` — source ids whose client opted out of sync.
  Fingerprint part: SHA-256 of the sorted ids.
* :class:`IgnoreDotfiles` — a ``.hostcoreignore`` file in a directory or any
  ancestor marks it local-only. Fingerprint part: a digest of the verdicts of
  every directory it has been asked about (no path shows in it), re-checked at
  most every :data:`IGNORE_RECHECK_SECONDS`.

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
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import msgspec

from hostcore.errors import HostcoreError
from hostcore.evidence.paths import ancestors, normalize_dir
from hostcore.export.ref import EMPTY_IDENTITY, identity
from hostcore.files import atomic_write, file_lock

CLASS_LIST_FILE = "policy/classes.tsv"
OPT_OUT_FILE = "policy/sync-opt-out.json"
IGNORE_FILE_NAME = ".hostcoreignore"
CLASSES = ("full", "local-only")
# How long one directory's dotfile verdict is trusted before its folders are
# looked at again (seconds): the bound on how late a new .hostcoreignore is seen.
IGNORE_TTL_SECONDS = 2.0

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


def _sha256_hex(data: bytes) -> str:
    if not data:
        return EMPTY_IDENTITY  # a missing or empty file: SHA-256 of no bytes
    import hashlib  # here, not at the top: it loads OpenSSL (a cold start's 2-3 ms)

    return hashlib.sha256(data).hexdigest()


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
        digest = _sha256_hex(data)
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
        self._part = "unreadable:" + _sha256_hex(data)

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
    ancestors of every directory ``directories()`` names (the store's scopes):
    at most every ``ttl`` seconds it looks at each of them again, so a dotfile
    added or removed by anyone moves the part (and with it the policy
    fingerprint and the export's context identity) within ``ttl``, and every
    process over the same store and folders computes the same part, whatever it
    happened to read before. Without ``directories`` the part covers the folders
    this instance has been asked about.
    """

    name = "ignore-dotfiles"

    def __init__(self, *, ttl: float | None = None, clock: Clock = time.monotonic,
                 directories: Callable[[], Iterable[str]] | None = None) -> None:
        self.ttl = IGNORE_TTL_SECONDS if ttl is None else ttl
        self._clock = clock
        self._directories = directories
        # folder -> (when looked at, holds a dotfile), for every folder on a path asked.
        self._own: dict[str, tuple[float, bool]] = {}
        self._verdicts: dict[str, bool] = {}
        self._checked_at: float | None = None
        self._part = ""  # the first fingerprint_part() computes it
        # The directories last named, and the folders on their paths (kept between
        # re-checks: thousands of scopes change rarely).
        self._known: frozenset[str] = frozenset()
        self._folders: frozenset[str] = frozenset()

    def fingerprint_part(self) -> str:
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= self.ttl:
            self._checked_at = now
            folders = self._folders_to_check()
            for folder in folders:
                self._holds(folder, now, fresh=True)
            self._part = identity(*sorted(f for f in folders if self._own[f][1]))
        return self._part

    def _folders_to_check(self) -> Iterable[str]:
        if self._directories is None:
            return list(self._own)
        try:
            named = frozenset(self._directories())
        except HostcoreError:
            # The store cannot be read now (a full disk, say): nothing can be
            # exported either, so the folders known so far serve until it can.
            return self._folders
        if named != self._known:
            self._known = named
            self._folders = frozenset(_ancestors(
                os.path.normpath(d) for d in named if d and os.path.isabs(d)))
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
        if cached is not None and not fresh and now - cached[0] < self.ttl:
            return cached[1]
        own = os.path.lexists(os.path.join(folder, IGNORE_FILE_NAME))
        if cached is not None and cached[1] != own:
            self._verdicts.clear()  # a dotfile came or went: every verdict below may change
        self._own[folder] = (now, own)
        return own

    def status(self) -> dict[str, object]:
        return {"cached_directories": len(self._verdicts),
                "ignoring_folders": sum(own for _, own in self._own.values())}


def _ancestors(directories: Iterable[str]) -> set[str]:
    """Every folder on the paths of ``directories`` (normalised, absolute), them included."""
    found: set[str] = set()
    for directory in directories:
        current = directory
        while current not in found:  # a shared ancestor ends the climb
            found.add(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    return found
