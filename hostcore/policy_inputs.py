"""The host's three built-in withholding-policy inputs.

* :class:`ClassList` — the machine-local class-per-entry list: directories marked
  ``full`` or ``local-only``; the longest entry on path boundaries decides.
  Fingerprint part: SHA-256 of the file's bytes (no path enters the digest).
* :class:`SyncOptOut` — source ids whose client opted out of sync, read through
  a TTL cache. Fingerprint part: SHA-256 of the sorted ids.
* :class:`IgnoreDotfiles` — a ``.hostcoreignore`` file in a directory or any
  ancestor marks it local-only. It cannot be enumerated, so it has no
  fingerprint part; lookups are cached per directory for a TTL.

An input whose state file exists but cannot be read or parsed withholds every
row until it is fixed (its ``status()`` says why): when in doubt, nothing leaves.
File formats are in ``docs/evidence.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import msgspec

from hostcore.atomic import atomic_write, ensure_dir
from hostcore.paths import ancestors, normalize_dir
from hostcore.ref import identity

CLASS_LIST_FILE = "policy/classes.tsv"
OPT_OUT_FILE = "policy/sync-opt-out.json"
IGNORE_FILE_NAME = ".hostcoreignore"
CLASSES = ("full", "local-only")
# How long the opt-out set read from disk is trusted (seconds).
OPT_OUT_TTL_SECONDS = 30.0
# How long one directory's dotfile verdict is trusted (seconds).
IGNORE_TTL_SECONDS = 60.0

_CLASS_LIST_HEADER = (
    b"# hostcore class-per-entry list (written by `hostcore policy`).\n"
    b"# One entry per line: <class>\\t<directory>; class is full or local-only.\n"
)

Clock = Callable[[], float]


class PolicyStateError(Exception):
    """A policy state file exists but cannot be read or parsed."""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise read-modify-write of one policy file across processes."""
    ensure_dir(path.parent)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class ClassList:
    """The class-per-entry list at ``<root>/policy/classes.tsv``."""

    name = "class-list"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._loaded = False
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
        """Read the file; re-parse only when its bytes changed. Returns the part."""
        self._loaded = True
        data = self._read()
        if data is None:
            self._digest = None
            self._by_directory.clear()
            return "unreadable"
        digest = hashlib.sha256(data).hexdigest()
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
    (a JSON list of strings), trusted for ``ttl`` seconds after each read."""

    name = "sync-opt-out"

    def __init__(self, path: Path, *, ttl: float | None = None,
                 clock: Clock = time.monotonic) -> None:
        self.path = Path(path)
        self.ttl = OPT_OUT_TTL_SECONDS if ttl is None else ttl
        self._clock = clock
        self._loaded_at: float | None = None
        self._ids: frozenset[str] = frozenset()
        self._part = ""
        self._error: str | None = None

    def _current(self) -> frozenset[str]:
        now = self._clock()
        if self._loaded_at is None or now - self._loaded_at >= self.ttl:
            self._load()
            self._loaded_at = now
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
        self._ids = frozenset(ids)
        self._error = None
        self._part = identity(*sorted(self._ids))

    def _fail(self, error: str, data: bytes) -> None:
        self._ids = frozenset()
        self._error = error
        self._part = "unreadable:" + hashlib.sha256(data).hexdigest()

    def fingerprint_part(self) -> str:
        self._current()
        return self._part

    def withholds(self, directory: str, source_id: str) -> bool:
        ids = self._current()
        return self._error is not None or source_id in ids

    def ids(self) -> list[str]:
        """The opted-out source ids, sorted (read fresh from disk)."""
        self._loaded_at = None
        current = sorted(self._current())
        if self._error is not None:
            raise PolicyStateError(self._error)
        return current

    def set(self, source_id: str, opted_out: bool) -> None:
        """Opt ``source_id`` out of sync (or back in) and rewrite the file atomically."""
        if not source_id:
            raise ValueError("source id must not be empty")
        with _locked(self.path):
            ids = set(self.ids())
            if opted_out:
                ids.add(source_id)
            else:
                ids.discard(source_id)
            atomic_write(self.path, msgspec.json.encode(sorted(ids)) + b"\n")
        self._loaded_at = None

    def status(self) -> dict[str, object]:
        ids = self._current()
        report: dict[str, object] = {"opted_out": len(ids)}
        if self._error is not None:
            report["error"] = self._error
        return report


class IgnoreDotfiles:
    """Withholds rows recorded in a directory that holds, or has an ancestor that
    holds, a ``.hostcoreignore`` file. Verdicts are cached per directory for
    ``ttl`` seconds, so adding a dotfile takes effect within the TTL."""

    name = "ignore-dotfiles"

    def __init__(self, *, ttl: float | None = None, clock: Clock = time.monotonic) -> None:
        self.ttl = IGNORE_TTL_SECONDS if ttl is None else ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, bool]] = {}

    def fingerprint_part(self) -> None:
        return None

    def withholds(self, directory: str, source_id: str) -> bool:
        now = self._clock()
        cached = self._cache.get(directory)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        verdict = bool(directory) and os.path.isabs(directory) and self._ignored(
            os.path.normpath(directory), now)
        self._cache[directory] = (now, verdict)
        return verdict

    def _ignored(self, directory: str, now: float) -> bool:
        # Walk up to the nearest ancestor with a fresh verdict (or the root), then
        # decide back down. A loop, not recursion: paths can be thousands of levels deep.
        chain: list[str] = []
        inherited = False
        current = directory
        while True:
            cached = self._cache.get(current)
            if cached is not None and now - cached[0] < self.ttl:
                inherited = cached[1]
                break
            chain.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for path in reversed(chain):
            inherited = inherited or os.path.lexists(os.path.join(path, IGNORE_FILE_NAME))
            self._cache[path] = (now, inherited)
        return inherited

    def status(self) -> dict[str, object]:
        return {"cached_directories": len(self._cache)}
