"""Shared machinery for sources that read agents' append-only JSONL transcripts.

:class:`JsonlFiles` reads the complete lines appended to a set of files since
a cursor, which is JSON of per-file state (offset, inode, and whatever context a
source keeps for a file). A line is only consumed once its newline is written;
a file that shrank or was replaced (another inode) is read again from the start
(rows carry dedupe keys, so nothing doubles); a file that disappeared is
forgotten, and the evidence it gave stays in the store. At most
``max_line_bytes`` of one line are ever held in memory: the rest of a longer
line is skipped and the line counted as oversized.

:class:`RemoteResolver` finds a directory's ``origin`` remote URL by reading
the repository's git config file (never by running git: no subprocess, no
network), cached per directory for a TTL. :func:`strip_credentials` removes a
user name and password from a URL before it is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from hostcore.records import encode_json

if TYPE_CHECKING:
    from hostcore.evidence.store import EvidenceRow, SourceBatch

# The most of one line held in memory; a longer line is skipped and counted.
MAX_LINE_BYTES = 1 << 20
# The most bytes one read() consumes across files before reporting more.
READ_BUDGET_BYTES = 64 << 20
# How long a directory's resolved git remote is trusted (seconds).
REMOTE_TTL_SECONDS = 300.0
# Bytes at the start of a file whose digest identifies it across reads.
HEAD_BYTES = 256
# Chunk used to skip the rest of an oversized line.
_SKIP_CHUNK = 1 << 16


class FileState(msgspec.Struct, omit_defaults=True):
    """Progress through one file: bytes consumed, its inode, a digest of its first
    bytes (to notice a file replaced in place), and a source's context."""

    offset: int = 0
    inode: int = 0
    head: str = ""
    context: dict[str, str] = msgspec.field(default_factory=dict)


class TranscriptCursor(msgspec.Struct):
    """The cursor of a transcript source: state per file, keyed by relative path."""

    files: dict[str, FileState] = msgspec.field(default_factory=dict)


@dataclass
class Line:
    """One complete line: where it starts, its bytes (without the newline) or, when
    ``oversized``, only its first ``max_line_bytes`` bytes."""

    start: int
    data: bytes
    oversized: bool = False


@dataclass
class ReadCounts:
    """What one read saw; reported as telemetry and by ``status()``."""

    files: int = 0
    lines: int = 0
    rows: int = 0
    malformed: int = 0
    oversized: int = 0
    unreadable: int = 0
    no_cwd: int = 0
    missing_home: bool = False

    def as_attributes(self) -> dict[str, int | bool]:
        return {"files": self.files, "lines": self.lines, "rows": self.rows,
                "malformed": self.malformed, "oversized": self.oversized,
                "unreadable": self.unreadable, "no_cwd": self.no_cwd,
                "missing_home": self.missing_home}


# The attributes of every transcript source's read event, one per ReadCounts field.
READ_EVENT_ATTRIBUTES: dict[str, type[int] | type[bool]] = {
    "files": int, "lines": int, "rows": int, "malformed": int, "oversized": int,
    "unreadable": int, "no_cwd": int, "missing_home": bool,
}


def decode_cursor(cursor: str | None) -> TranscriptCursor:
    """The cursor a source persisted; an unreadable one starts over (keys dedupe)."""
    if not cursor:
        return TranscriptCursor()
    try:
        return msgspec.json.decode(cursor, type=TranscriptCursor)
    except msgspec.DecodeError:
        return TranscriptCursor()


def encode_cursor(cursor: TranscriptCursor) -> str:
    return encode_json(cursor).decode()


# Called with (file name, line, that file's state) for each new line.
LineHandler = Callable[[str, Line, FileState], None]


class JsonlFiles:
    """Reads new complete lines of many JSONL files against a :class:`TranscriptCursor`.

    :param max_line_bytes: the most of one line held in memory.
    :param budget_bytes: stop after consuming this many bytes in one read.
    """

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES,
                 budget_bytes: int = READ_BUDGET_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.budget_bytes = budget_bytes

    def read(self, files: Iterable[tuple[str, Path]], cursor: TranscriptCursor,
             handle_line: LineHandler, counts: ReadCounts) -> tuple[TranscriptCursor, bool]:
        """Call ``handle_line(name, line, state)`` for every new complete line.

        ``files`` are ``(name, path)`` pairs; ``name`` keys the cursor. Returns the
        new cursor and whether the budget stopped the read early.
        """
        budget = self.budget_bytes
        seen: dict[str, FileState] = {}
        more = False
        for name, path in files:
            previous = cursor.files.get(name)
            if more:
                if previous is not None:
                    seen[name] = previous
                continue
            try:
                stat = path.stat()
            except OSError:
                continue  # vanished between listing and reading
            state = previous
            if state is None or state.inode != stat.st_ino or stat.st_size < state.offset:
                state = FileState(offset=0, inode=stat.st_ino)
            seen[name] = state
            if stat.st_size == state.offset:
                continue
            counts.files += 1
            try:
                with path.open("rb") as handle:
                    if state.head and _head_digest(handle, state.head) != state.head:
                        # Replaced in place: start over (rows carry keys, nothing doubles).
                        state = seen[name] = FileState(offset=0, inode=stat.st_ino)
                    for line in self._lines(handle, state.offset, budget):
                        counts.lines += 1
                        handle_line(name, line, state)
                        budget -= handle.tell() - state.offset
                        state.offset = handle.tell()
                    state.head = _head_digest(handle, min(HEAD_BYTES, state.offset))
            except OSError:
                counts.unreadable += 1
                seen[name] = previous if previous is not None else state
                continue
            if budget <= 0:
                more = True
        return TranscriptCursor(files=seen), more

    def _lines(self, handle: BinaryIO, offset: int, budget: int) -> Iterator[Line]:
        """Complete lines from ``offset`` while ``budget`` lasts; stops before a last
        line still being written (no newline yet)."""
        handle.seek(offset)
        limit = self.max_line_bytes
        consumed = 0
        while consumed < budget:
            start = handle.tell()
            data = handle.readline(limit + 1)
            if data.endswith(b"\n"):
                consumed += len(data)
                yield Line(start, data[:-1])
                continue
            if len(data) <= limit:
                return  # end of file inside a line: wait for its newline
            while True:
                rest = handle.readline(_SKIP_CHUNK)
                if not rest:
                    return  # an oversized line still being written
                if rest.endswith(b"\n"):
                    break
            consumed += handle.tell() - start
            yield Line(start, data[:limit], oversized=True)


def _head_digest(handle: BinaryIO, size: int | str) -> str:
    """``"<n>:<digest>"`` of the file's first ``n`` bytes; ``size`` is ``n`` or an
    earlier result whose ``n`` to reuse."""
    if isinstance(size, str):
        size = int(size.partition(":")[0] or 0)
    handle.seek(0)
    data = handle.read(size)
    return f"{len(data)}:{hashlib.blake2b(data, digest_size=8).hexdigest()}"


def jsonl_files(folder: Path, pattern: str) -> list[tuple[str, Path]]:
    """``(relative name, path)`` of files under ``folder`` matching ``pattern``, sorted.

    A missing or unreadable folder gives no files.
    """
    try:
        found = sorted(folder.glob(pattern))
    except OSError:
        return []
    return [(path.relative_to(folder).as_posix(), path) for path in found if path.is_file()]


_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@")


def strip_credentials(url: str) -> str:
    """``url`` without ``user:password@`` (``https://tok@host/x`` -> ``https://host/x``).

    scp-style remotes (``git@github.com:owner/repo.git``) carry no secret and are
    kept as they are.
    """
    return _USERINFO.sub(r"\1", url.strip())


class RemoteResolver:
    """The ``origin`` URL of the git repository holding a directory, from its config
    file; ``""`` when there is none. Never runs git."""

    def __init__(self, *, ttl: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = REMOTE_TTL_SECONDS if ttl is None else ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, str]] = {}

    def remote_of(self, directory: str) -> str:
        if not directory or not os.path.isabs(directory):
            return ""
        now = self._clock()
        cached = self._cache.get(directory)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        remote = _origin_url(Path(directory))
        self._cache[directory] = (now, remote)
        return remote


def _origin_url(directory: Path) -> str:
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                return _read_origin(dot_git / "config")
            if dot_git.is_file():
                return _read_origin(_linked_config(dot_git))
        except OSError:
            return ""
    return ""


def _linked_config(dot_git_file: Path) -> Path:
    """The config of a worktree or submodule whose ``.git`` is a ``gitdir:`` file."""
    text = dot_git_file.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return dot_git_file.parent / ".git-not-a-gitdir-file"
    gitdir = Path(text[len("gitdir:"):].strip())
    if not gitdir.is_absolute():
        gitdir = dot_git_file.parent / gitdir
    commondir = gitdir / "commondir"
    if commondir.is_file():
        common = Path(commondir.read_text(encoding="utf-8").strip())
        gitdir = common if common.is_absolute() else gitdir / common
    return gitdir / "config"


_SECTION = re.compile(r'^\s*\[\s*remote\s+"((?:[^"\\]|\\.)*)"\s*\]')
_OTHER_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _read_origin(config: Path) -> str:
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    in_origin = False
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            in_origin = section.group(1) == "origin"
            continue
        if _OTHER_SECTION.match(line):
            in_origin = False
            continue
        if in_origin:
            url = _URL.match(line)
            if url:
                return strip_credentials(url.group(1).strip('"'))
    return ""


# Turns one line into at most one row; counts what it skips. Called with the
# source, the file's name, the line and the file's state (whose context the
# parser may update, e.g. a session id read from a header line).
LineParser = Callable[["TranscriptSource", str, Line, FileState], "EvidenceRow | None"]


class TranscriptSource:
    """A source over a folder of JSONL transcripts (see the contrib sources).

    :param name: the source name, also the rows' ``source_id`` and partition.
    :param folder: the transcript folder; missing means no rows, not an error.
    :param patterns: glob patterns of transcript files under ``folder``.
    :param parse: a :data:`LineParser`.
    :param event: the catalogued event each read emits with its counts.
    :param emit: the host's ``emit``.
    """

    def __init__(self, *, name: str, folder: Path, patterns: tuple[str, ...],
                 parse: LineParser, event: str, emit: Callable[..., object],
                 files: JsonlFiles | None = None,
                 remotes: RemoteResolver | None = None) -> None:
        self.name = name
        self.folder = folder
        self.patterns = patterns
        self.remotes = remotes or RemoteResolver()
        self.counts = ReadCounts()
        self._parse = parse
        self._event = event
        self._emit = emit
        self._files = files or JsonlFiles()

    def read(self, cursor: str | None) -> SourceBatch:
        """New rows since ``cursor`` and the cursor to persist with them."""
        from hostcore.evidence.store import SourceBatch

        counts = self.counts = ReadCounts()
        if not self.folder.is_dir():
            counts.missing_home = True
            self._emit(self._event, **counts.as_attributes())
            return SourceBatch([], cursor)
        rows: list[EvidenceRow] = []

        def handle(name: str, line: Line, state: FileState) -> None:
            row = self._parse(self, name, line, state)
            if row is not None:
                rows.append(row)

        files = sorted({item for pattern in self.patterns
                        for item in jsonl_files(self.folder, pattern)})
        new_cursor, more = self._files.read(files, decode_cursor(cursor), handle, counts)
        counts.rows = len(rows)
        self._emit(self._event, **counts.as_attributes())
        return SourceBatch(rows, encode_cursor(new_cursor), more)

    def status(self) -> dict[str, int | bool]:
        """The last read's counts."""
        return {f"last_{key}": value for key, value in self.counts.as_attributes().items()}


def line_key(session: str, line: Line) -> str:
    """A dedupe key for a line without an id of its own: session and content digest."""
    return f"{session}:{hashlib.blake2b(line.data, digest_size=12).hexdigest()}"


def json_string_field(prefix: bytes, field: str) -> str | None:
    """The first ``"field": "value"`` string in ``prefix`` (of an oversized line),
    unescaped; ``None`` when absent. Best effort by design: the line is not parsed."""
    found = re.search(rb'"' + re.escape(field.encode()) + rb'"\s*:\s*"((?:[^"\\]|\\.)*)"',
                      prefix)
    if found is None:
        return None
    try:
        return json.loads(b'"' + found.group(1) + b'"')
    except ValueError:
        return None
