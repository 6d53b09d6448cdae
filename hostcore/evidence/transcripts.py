"""Shared machinery for sources that read agents' append-only JSONL transcripts.

:func:`list_files` finds the transcript files under a folder with
``os.scandir`` (regular files only; a symlink that leads out of the folder is
counted and skipped unless the source follows them). :class:`JsonlFiles` reads
the complete lines appended to those files since a cursor, which is JSON of
per-file state (offset, inode, and whatever context a source keeps for a file).
A file whose size equals its offset is skipped on its ``stat`` alone, so a tick
with nothing new opens nothing. A line is only consumed once its newline is
written; a file that shrank or was replaced (another inode) is read again from
the start (rows carry dedupe keys, so nothing doubles); a file that disappeared
is forgotten, and the evidence it gave stays in the store. At most
``max_line_bytes`` of one line are ever held in memory: the rest of a longer
line is skipped and the line counted as oversized. A UTF-8 byte-order mark at the
start of a file is skipped, not taken for part of its first line. One read stops at a budget of
bytes, lines and seconds, so a batch (one transaction) stays small whatever the
backlog.

:class:`RemoteResolver` finds a directory's ``origin`` remote URL by reading
the repository's git config file (never by running git: no subprocess, no
network), cached per directory for a TTL. It reads only regular files, opened
non-blocking, of at most :data:`GIT_FILE_MAX_BYTES`. :func:`strip_credentials`
removes a user name and password from a URL before it is stored.

:class:`TranscriptSource` turns lines into rows through a source's parser: a
line the parser cannot turn into a row (or that makes it raise) is counted by
reason and skipped, and never stops the lines after it.
"""

from __future__ import annotations

import fnmatch
import io
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

import msgspec

from hostcore.digests import blake2b
from hostcore.evidence.rows import SourceBatch, storable_text
from hostcore.files import LockBusy
from hostcore.records import encode_json

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.evidence.rows import EvidenceRow
    from hostcore.host import Host

log = logging.getLogger("hostcore.evidence.transcripts")

# The most of one line held in memory; a longer line is skipped and counted.
MAX_LINE_BYTES = 1 << 20
# The most bytes, lines and seconds one read() spends before reporting more. The
# lines bound the rows of a batch, which is one transaction and held in memory.
READ_BUDGET_BYTES = 64 << 20
READ_BUDGET_LINES = 5_000
READ_BUDGET_SECONDS = 1.0
# How long a directory's resolved git remote is trusted (seconds).
REMOTE_TTL_SECONDS = 300.0
# The largest git config, gitdir or commondir file read for a remote; anything
# larger (or not a regular file: a FIFO, /dev/zero) counts as "no remote".
GIT_FILE_MAX_BYTES = 256 << 10
# Bytes at the start of a file whose digest identifies it across reads.
HEAD_BYTES = 256
# Chunk used to skip the rest of an oversized line.
_SKIP_CHUNK = 1 << 16
# The UTF-8 byte-order mark some editors put at the start of a file.
_BOM = b"\xef\xbb\xbf"
# Lines read between two looks at the clock.
_CLOCK_EVERY = 512
# Opening flags of files read here: never hang on a FIFO, never leak into a child.
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


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


class Line(msgspec.Struct, gc=False):
    """One complete line: where it starts, its bytes (without the newline) or, when
    ``oversized``, only its first ``max_line_bytes`` bytes, and where it ends.
    Untracked by the cycle collector (it holds no container): one is made per line."""

    start: int
    data: bytes
    oversized: bool = False
    end: int = 0  # the offset just past its newline


class ReadCounts(msgspec.Struct):
    """What one read saw; reported as telemetry and by ``status()``.

    Lines skipped, by reason: ``malformed`` (not the JSON expected),
    ``oversized``, ``no_cwd`` (no directory to file it under), ``unencodable``
    (text a parser found not valid Unicode), ``parse_error`` (the parser raised).
    A row whose text is not valid Unicode is counted by the store instead.
    Files: ``unreadable`` (retried next read), ``outside`` (a symlink leading out
    of the folder, skipped).
    """

    files: int = 0
    lines: int = 0
    rows: int = 0
    malformed: int = 0
    oversized: int = 0
    unreadable: int = 0
    no_cwd: int = 0
    unencodable: int = 0
    parse_error: int = 0
    outside: int = 0
    missing_home: bool = False

    def as_attributes(self) -> dict[str, int | bool]:
        return {name: getattr(self, name) for name in self.__struct_fields__}

    def skipped(self) -> dict[str, int]:
        """Lines read past without a row, by reason (the non-zero ones)."""
        found = {reason: getattr(self, reason) for reason in SKIP_REASONS}
        return {reason: n for reason, n in found.items() if n}


# The ReadCounts fields that count skipped lines (what SourceBatch.skipped carries).
SKIP_REASONS = ("malformed", "oversized", "no_cwd", "unencodable", "parse_error")

# The attributes of every transcript source's read event, one per ReadCounts field.
READ_EVENT_ATTRIBUTES: dict[str, type[int] | type[bool]] = {
    name: bool if name == "missing_home" else int for name in ReadCounts.__struct_fields__
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
# Called with (file name, where the first line starts, lines, that file's state) for
# a block of new complete lines, none oversized, in order and without newlines.
LinesHandler = Callable[[str, int, list[bytes], FileState], None]


class FilesRead(NamedTuple):
    """What :meth:`JsonlFiles.read` returns."""

    cursor: TranscriptCursor
    more: bool
    changed: bool
    stopped_at: str | None = None  # with ``more``: the file a budget stopped in


class _Budget(msgspec.Struct):
    """What is left of one read: bytes, lines, and a deadline on the clock."""

    bytes: int
    lines: int
    deadline: float
    clock: Callable[[], float]

    def spent(self) -> bool:
        return self.bytes <= 0 or self.lines <= 0 or self.clock() >= self.deadline


class JsonlFiles:
    """Reads new complete lines of many JSONL files against a :class:`TranscriptCursor`.

    :param max_line_bytes: the most of one line held in memory.
    :param budget_bytes: stop after consuming this many bytes in one read.
    :param budget_lines: stop after this many lines in one read.
    :param budget_seconds: stop after this long (checked every few hundred lines).
    """

    def __init__(self, *, max_line_bytes: int | None = None, budget_bytes: int | None = None,
                 budget_lines: int | None = None, budget_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_line_bytes = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
        self.budget_bytes = READ_BUDGET_BYTES if budget_bytes is None else budget_bytes
        self.budget_lines = READ_BUDGET_LINES if budget_lines is None else budget_lines
        self.budget_seconds = READ_BUDGET_SECONDS if budget_seconds is None else budget_seconds
        self._clock = clock

    def read(self, files: Iterable[tuple[str, str | Path]], cursor: TranscriptCursor,
             handle_line: LineHandler, counts: ReadCounts, *,
             resume_at: str | None = None,
             handle_lines: LinesHandler | None = None) -> FilesRead:
        """Call ``handle_line(name, line, state)`` for every new complete line, or,
        given ``handle_lines``, ``handle_lines(name, start, lines, state)`` for each
        block of up to a few hundred lines that are not oversized (an oversized
        line still goes to ``handle_line``, in its place among the others).

        ``files`` are ``(name, path)`` pairs, sorted by name; ``name`` keys the
        cursor. Files named before ``resume_at`` keep their state unlooked-at (a
        read that goes on where a budget stopped the last one, over the same
        files). Returns the new cursor, whether a budget stopped the read early
        (and in which file), and whether anything changed (a file was read,
        appeared, went or was replaced).
        """
        budget = _Budget(self.budget_bytes, self.budget_lines,
                         self._clock() + self.budget_seconds, self._clock)
        seen: dict[str, FileState] = {}
        more = changed = False
        stopped_at = None
        for name, path in files:
            previous = cursor.files.get(name)
            if more or (resume_at is not None and name < resume_at):
                if previous is not None:
                    seen[name] = previous
                continue
            try:
                found = os.stat(path)
            except OSError:
                continue  # vanished between listing and reading
            state = previous
            if state is None or state.inode != found.st_ino or found.st_size < state.offset:
                state = FileState(offset=0, inode=found.st_ino)
                changed = True
            seen[name] = state
            if found.st_size == state.offset:
                continue  # nothing new: known by its stat alone
            counts.files += 1
            changed = True
            try:
                with open_transcript(path) as handle:
                    if state.head and _head_digest(handle, state.head) != state.head:
                        # Replaced in place: start over (rows carry keys, nothing doubles).
                        state = seen[name] = FileState(offset=0, inode=found.st_ino)
                    counts.lines += self._read_lines(handle, name, state, budget, handle_line,
                                                     handle_lines)
                    state.head = _head_digest(handle, min(HEAD_BYTES, state.offset))
            except OSError:
                counts.unreadable += 1
                seen[name] = previous if previous is not None else state
                continue
            more = budget.spent()
            if more:
                stopped_at = name
        changed = changed or len(seen) != len(cursor.files)
        return FilesRead(TranscriptCursor(files=seen), more, changed, stopped_at)

    def _read_lines(self, handle: BinaryIO, name: str, state: FileState, budget: _Budget,
                    handle_line: LineHandler, handle_lines: LinesHandler | None) -> int:
        """Hand ``handle_line`` each complete line from ``state.offset`` while ``budget``
        lasts, moving ``state.offset`` past it; stops before a last line still being
        written (no newline yet). Returns how many lines it handed over.

        Reads blocks of ``max_line_bytes + 1`` bytes and splits them at newlines (a
        line is never read whole when it is longer), so a block ending inside a
        line is the only part read twice. The budget is applied to a block at a
        time (the clock is looked at every few hundred lines), so the loop over a
        block's lines does nothing but hand them over: it runs once per line read,
        or, with ``handle_lines``, not at all (each few hundred go in one call).
        """
        limit = self.max_line_bytes
        first = start = state.offset
        left_lines = budget.lines
        try:
            while start - first < budget.bytes and left_lines > 0:
                handle.seek(start)
                block = handle.read(limit + 1)
                if not start and block[:3] == _BOM:
                    # A byte-order mark (PowerShell writes one) is no part of the first
                    # line: read again past it. Looked at once a block, never per line.
                    start = len(_BOM)
                    continue
                lines, rest = _split_lines(block)
                if not lines:  # no newline in the block
                    if len(rest) <= limit:
                        break  # end of file inside a line: wait for its newline
                    if not _skip_rest(handle.readline):
                        break  # an oversized line still being written
                    end = handle.tell()
                    left_lines -= 1
                    handle_line(name, Line(start, rest[:limit], True, end), state)
                    start = end
                    continue
                # The budget is applied to the block as a whole, not line by line: the
                # lines it allows, and the bytes when they could run out inside it.
                del lines[left_lines:]
                if budget.bytes - (start - first) <= limit + 1:
                    lines = _lines_within(lines, budget.bytes - (start - first))
                for at in range(0, len(lines), _CLOCK_EVERY):
                    piece = lines[at:at + _CLOCK_EVERY]
                    if handle_lines is not None:
                        handle_lines(name, start, piece, state)
                        start += sum(map(len, piece)) + len(piece)
                    else:
                        for data in piece:
                            end = start + len(data) + 1
                            handle_line(name, Line(start, data, False, end), state)
                            start = end
                    left_lines -= len(piece)
                    if budget.clock() >= budget.deadline:
                        break
                else:
                    continue  # the block is used up: read the next
                break  # out of time
        finally:
            state.offset = start
            read = budget.lines - left_lines
            budget.bytes, budget.lines = budget.bytes - (start - first), left_lines
        return read


def _lines_within(lines: list[bytes], left: int) -> list[bytes]:
    """The first of ``lines`` up to the one whose newline uses up ``left`` bytes."""
    for n, data in enumerate(lines):
        left -= len(data) + 1
        if left <= 0:
            return lines[:n + 1]
    return lines


def _skip_rest(readline: Callable[[int], bytes]) -> bool:
    """Read past the rest of an oversized line; False when its newline is not written
    yet."""
    while True:
        rest = readline(_SKIP_CHUNK)
        if not rest:
            return False
        if rest[-1:] == b"\n":
            return True


def open_transcript(path: str | Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (never blocks on a FIFO);
    ``OSError`` otherwise."""
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _head_digest(handle: BinaryIO, size: int | str) -> str:
    """``"<n>:<digest>"`` of the file's first ``n`` bytes; ``size`` is ``n`` or an
    earlier result whose ``n`` to reuse."""
    if isinstance(size, str):
        size = int(size.partition(":")[0] or 0)
    handle.seek(0)
    data = handle.read(size)
    return f"{len(data)}:{blake2b(data, digest_size=8).hexdigest()}"


def list_files(folder: Path, patterns: Iterable[str], counts: ReadCounts, *,
               follow_symlinks: bool = False) -> list[tuple[str, str]]:
    """``(relative name, path)`` of the regular files under ``folder`` matching any of
    ``patterns`` (``/``-separated, ``*`` and ``?`` within one name, as glob does:
    names starting with a dot only match a pattern that does), sorted by name.

    Each folder is scanned once for all the patterns, and only folders a pattern
    can reach are scanned. A symlink whose target lies outside ``folder`` is
    counted (``outside``) and skipped unless ``follow_symlinks``. A file whose
    name is not valid Unicode is counted ``unreadable`` (it could not be kept in
    the cursor). A missing or unreadable folder gives no files.
    """
    walk = _Walk(os.path.realpath(folder), follow_symlinks, counts)
    active = [(parts, 0) for parts in
              (tuple(p for p in pattern.split("/") if p) for pattern in patterns) if parts]
    walk.scan(str(folder), "", active)
    counts.outside += len(walk.outside)
    return sorted(walk.found.items())


class _Walk:
    """One listing: what it found, and the symlinks out it skipped (each once)."""

    def __init__(self, inside: str, follow: bool, counts: ReadCounts) -> None:
        self.inside = inside
        self.follow = follow
        self.counts = counts
        self.found: dict[str, str] = {}
        self.outside: set[str] = set()

    def scan(self, folder: str, prefix: str, active: list[tuple[tuple[str, ...], int]]) -> None:
        """Match ``folder``'s entries against each pattern's part at its depth."""
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:
            return
        for entry in listed:
            name = entry.name
            final = False
            deeper = []
            for parts, at in active:
                if _matches(name, parts[at]):
                    if at + 1 < len(parts):
                        deeper.append((parts, at + 1))
                    else:
                        final = True
            if not final and not deeper:
                continue
            try:
                if entry.is_symlink() and not self.follow and not _within(entry.path,
                                                                          self.inside):
                    self.outside.add(entry.path)
                    continue
                if final and entry.is_file():
                    self._found(f"{prefix}{name}", entry.path)
                if deeper and entry.is_dir():
                    self.scan(entry.path, f"{prefix}{name}/", deeper)
            except OSError:
                continue

    def _found(self, name: str, path: str) -> None:
        if storable_text(name):
            self.found[name] = path
        else:
            self.counts.unreadable += 1


def _matches(name: str, part: str) -> bool:
    """Whether one name matches one pattern part, as glob matches it."""
    if name[:1] == "." and part[:1] != ".":
        return False
    if part == "*":
        return True
    if part[:1] == "*" and not _WILDCARD.search(part, 1):
        return name.endswith(part[1:])  # "*.jsonl": the common case, without a regex
    return fnmatch.fnmatchcase(name, part)


_WILDCARD = re.compile(r"[*?\[]")


def _within(path: str, folder: str) -> bool:
    """Whether ``path``, symlinks resolved, lies inside ``folder`` (already resolved)."""
    target = os.path.realpath(path)
    return target == folder or target.startswith(folder.rstrip(os.sep) + os.sep)




# Patterns kept as text: re compiles each on first use and caches it, so a start
# that never needs one (most never do) pays nothing for it.
_USERINFO = r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@"


def strip_credentials(url: str) -> str:
    """``url`` without ``user:password@`` (``https://tok@host/x`` -> ``https://host/x``).

    scp-style remotes (``git@github.com:owner/repo.git``) carry no secret and are
    kept as they are.
    """
    return re.sub(_USERINFO, r"\1", url.strip())


class RemoteResolver:
    """The ``origin`` URL of the git repository holding a directory, from its config
    file; ``""`` when there is none or it cannot be read. Never runs git, never
    raises."""

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
        try:
            remote = _origin_url(Path(directory))
        except (OSError, ValueError):
            remote = ""  # a path the system refuses (a NUL byte, too long): no remote
        self._cache[directory] = (now, remote)
        return remote


def _origin_url(directory: Path) -> str:
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        try:
            mode = os.stat(dot_git).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return ""
        if stat.S_ISDIR(mode):
            return _read_origin(dot_git / "config")
        if stat.S_ISREG(mode):
            config = _linked_config(dot_git)
            return "" if config is None else _read_origin(config)
        return ""  # a .git that is neither: no remote
    return ""


def _read_small(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most
    :data:`GIT_FILE_MAX_BYTES`, else ``None`` (opening never blocks)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_size > GIT_FILE_MAX_BYTES:
            return None
        data = os.read(fd, GIT_FILE_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= GIT_FILE_MAX_BYTES else None


def _linked_config(dot_git_file: Path) -> Path | None:
    """The config of a worktree or submodule whose ``.git`` is a ``gitdir:`` file."""
    data = _read_small(dot_git_file)
    text = os.fsdecode(data).strip() if data is not None else ""
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    if not gitdir.is_absolute():
        gitdir = dot_git_file.parent / gitdir
    common = _read_small(gitdir / "commondir")
    if common is not None and common.strip():
        found = Path(os.fsdecode(common.strip()))
        gitdir = found if found.is_absolute() else gitdir / found
    return gitdir / "config"


# Git config lines, as text (see _USERINFO).
_SECTION = r'\s*\[\s*remote\s+"((?:[^"\\]|\\.)*)"\s*\]'
_OTHER_SECTION = r"\s*\["
_URL = r"(?i)\s*url\s*=\s*(.*?)\s*$"


def _read_origin(config: Path) -> str:
    data = _read_small(config)
    if data is None:
        return ""
    in_origin = False
    for line in data.decode("utf-8", errors="replace").splitlines():
        section = re.match(_SECTION, line)
        if section:
            in_origin = section.group(1) == "origin"
            continue
        if re.match(_OTHER_SECTION, line):
            in_origin = False
            continue
        if in_origin:
            url = re.match(_URL, line)
            if url:
                return strip_credentials(url.group(1).strip('"'))
    return ""


# Turns one line into at most one row; counts what it skips. Called with the
# source, the file's name, the line and the file's state (whose context the
# parser may update, e.g. a session id read from a header line).
LineParser = Callable[["TranscriptSource", str, Line, FileState], "EvidenceRow | None"]

# Optional, beside a LineParser: turns a block of complete lines of one file (in
# order, without newlines, none oversized: those go to the LineParser) into rows
# appended to the list it is given, with exactly the rows, counts and context the
# LineParser would give line by line. Called with the source, the file's name, the
# lines, the file's state and the list. It saves the per-line calls in between;
# if it raises, what it did to the block is undone and the block goes line by line.
LinesParser = Callable[["TranscriptSource", str, list[bytes], FileState, "list[EvidenceRow]"],
                       None]


def parse_one(parse_lines: LinesParser, source: TranscriptSource, name: str, data: bytes,
              state: FileState) -> EvidenceRow | None:
    """The row ``parse_lines`` gives for the one line ``data`` (``None``: it gave none):
    how a source with a block parser answers its :data:`LineParser` for a line that is
    not oversized, so the two can never disagree."""
    rows: list[EvidenceRow] = []
    parse_lines(source, name, [data], state, rows)
    return rows[0] if rows else None


class TranscriptSource:
    """A source over a folder of JSONL transcripts (see the contrib sources).

    :param name: the source name, also the rows' ``source_id`` and partition.
    :param folder: the transcript folder; missing means no rows, not an error.
    :param patterns: patterns of transcript files under ``folder`` (see
        :func:`list_files`).
    :param parse: a :data:`LineParser`.
    :param parse_lines: a :data:`LinesParser` giving what ``parse`` gives, a block
        of lines a call (optional: a source without one is read line by line).
    :param event: the catalogued event each read emits with its counts.
    :param emit: the host's ``emit``.
    :param follow_symlinks: also read files reached through symlinks that lead
        out of ``folder`` (by default they are counted and skipped).
    """

    def __init__(self, *, name: str, folder: Path, patterns: tuple[str, ...],
                 parse: LineParser, event: str, emit: Callable[..., object],
                 files: JsonlFiles | None = None,
                 remotes: RemoteResolver | None = None,
                 follow_symlinks: bool = False,
                 parse_lines: LinesParser | None = None) -> None:
        self.name = name
        self.folder = folder
        self.patterns = patterns
        self.follow_symlinks = follow_symlinks
        self.remotes = remotes or RemoteResolver()
        self.counts = ReadCounts()
        self._parse = parse
        self._parse_lines = parse_lines
        self._event = event
        self._emit = emit
        self._files = files or JsonlFiles()
        self._remote_memo: dict[str, str] = {}
        self._last: _Handed | None = None

    def read(self, cursor: str | None) -> SourceBatch:
        """New rows since ``cursor`` and the cursor to persist with them."""
        counts = self.counts = ReadCounts()
        self._remote_memo = {}
        if not self.folder.is_dir():
            counts.missing_home = True
            self._emit(self._event, **counts.as_attributes())
            return SourceBatch([], cursor)
        rows: list[EvidenceRow] = []
        handle = self._line_handler(rows, counts)
        last, self._last = self._last, None
        going_on = last if last is not None and last.cursor == cursor else None
        if going_on is not None and going_on.files is not None:
            files = going_on.files
            counts.outside, counts.unreadable = going_on.listed
        else:
            files = list_files(self.folder, self.patterns, counts,
                               follow_symlinks=self.follow_symlinks)
        listed = (counts.outside, counts.unreadable)
        done = self._files.read(
            files, going_on.decoded if going_on is not None else decode_cursor(cursor),
            handle, counts, resume_at=going_on.stopped_at if going_on is not None else None,
            handle_lines=self._lines_handler(rows, counts, handle))
        if done.changed:
            # Context a parser kept that the cursor could not carry (a lone
            # surrogate) goes; rows made with it meanwhile the store counts and skips.
            for state in done.cursor.files.values():
                if state.context:
                    _drop_unencodable(state.context)
        counts.rows = len(rows)
        self._emit(self._event, **counts.as_attributes())
        # Nothing changed: the cursor goes back as it came, not encoded again.
        handed = encode_cursor(done.cursor) if done.changed or not cursor else cursor
        self._last = _Handed(handed, done.cursor, files if done.more else None,
                             done.stopped_at, listed)
        return SourceBatch(rows, handed, done.more, counts.skipped())

    def read_file(self, cursor: str | None, path: str, *, seconds: float
                  ) -> SourceBatch | None:
        """New rows of the one transcript at ``path`` since ``cursor``, read for at most
        ``seconds``, with the cursor to persist (every other file's state in it kept
        as it was); ``None`` when ``path`` is none of this source's files (outside its
        folder, matching none of its patterns, or behind a symlink out of it). For a
        hook that reads the session that just stopped without listing the folder."""
        name = self.name_of(path)
        if name is None:
            return None
        counts = self.counts = ReadCounts()
        self._remote_memo = {}
        self._last = None  # the next read() lists the folder again
        decoded = decode_cursor(cursor)
        # The read moves the file's state in place: what it was, to tell a change.
        before = encode_json(decoded.files.get(name))
        rows: list[EvidenceRow] = []
        files = JsonlFiles(max_line_bytes=self._files.max_line_bytes,
                           budget_bytes=self._files.budget_bytes,
                           budget_lines=self._files.budget_lines, budget_seconds=seconds)
        handle = self._line_handler(rows, counts)
        done = files.read([(name, path)], decoded, handle, counts,
                          handle_lines=self._lines_handler(rows, counts, handle))
        merged = TranscriptCursor(files={**decoded.files, **done.cursor.files})
        for state in done.cursor.files.values():
            if state.context:
                _drop_unencodable(state.context)
        counts.rows = len(rows)
        self._emit(self._event, **counts.as_attributes())
        changed = encode_json(done.cursor.files.get(name)) != before or not cursor
        handed = encode_cursor(merged) if changed else cursor
        return SourceBatch(rows, handed, done.more, counts.skipped())

    def name_of(self, path: str) -> str | None:
        """The name ``path`` has in this source's cursor (relative to its folder, ``/``
        between parts), or ``None`` when it is none of its files."""
        folder = os.path.realpath(self.folder)
        found = os.path.abspath(path)
        relative = None
        for base in (os.path.abspath(self.folder), folder):
            if found.startswith(base.rstrip(os.sep) + os.sep):
                relative = found[len(base.rstrip(os.sep)) + 1:]
                break
        if relative is None:
            resolved = os.path.realpath(found)
            if not resolved.startswith(folder.rstrip(os.sep) + os.sep):
                return None
            relative = resolved[len(folder.rstrip(os.sep)) + 1:]
        parts = relative.split(os.sep)
        if not any(len(pattern) == len(parts) and all(map(_matches, parts, pattern))
                   for pattern in (p.split("/") for p in self.patterns)):
            return None
        if not self.follow_symlinks and not _within(found, folder):
            return None
        name = "/".join(parts)
        return name if storable_text(name) else None

    def _line_handler(self, rows: list[EvidenceRow], counts: ReadCounts) -> LineHandler:
        parse, keep = self._parse, rows.append  # looked up once: handle runs once a line

        def handle(name: str, line: Line, state: FileState) -> None:
            # Each line ends as one row or one count: the parser's, or one here.
            try:
                row = parse(self, name, line, state)
            except Exception:
                counts.parse_error += 1
                log.debug("source %r: a line made the parser raise", self.name, exc_info=True)
                return
            if row is not None:
                keep(row)

        return handle

    def _lines_handler(self, rows: list[EvidenceRow], counts: ReadCounts,
                       handle_line: LineHandler) -> LinesHandler | None:
        """The block handler of a source with a :data:`LinesParser`, else None."""
        parse_lines = self._parse_lines
        if parse_lines is None:
            return None

        def handle(name: str, start: int, lines: list[bytes], state: FileState) -> None:
            # What a raising block parser may have done is undone: the rows it kept,
            # its counts and the file's context go back to the block's start, and the
            # block is parsed again line by line, so each line ends as it would have.
            # Copied once a block of a few hundred lines.
            context = state.context
            kept, saved, was = len(rows), dict(context), msgspec.structs.astuple(counts)
            try:
                parse_lines(self, name, lines, state, rows)
            except Exception:
                log.debug("source %r: a block made the parser raise; read line by line",
                          self.name, exc_info=True)
                del rows[kept:]
                context.clear()
                context.update(saved)
                for field, value in zip(counts.__struct_fields__, was, strict=True):
                    setattr(counts, field, value)
                for data in lines:
                    end = start + len(data) + 1
                    handle_line(name, Line(start, data, False, end), state)
                    start = end

        return handle

    def remote_of(self, directory: str) -> str:
        """``directory``'s origin remote, asked of :attr:`remotes` once per read."""
        remote = self._remote_memo.get(directory)
        if remote is None:
            remote = self._remote_memo[directory] = self.remotes.remote_of(directory)
        return remote

    def status(self) -> dict[str, int | bool]:
        """The last read's counts."""
        return {f"last_{key}": value for key, value in self.counts.as_attributes().items()}


class _Handed(NamedTuple):
    """The cursor a source's last read handed out, and what the next read from it
    can reuse: the cursor decoded (an idle tick decodes nothing) and, when a budget
    stopped that read, its file listing and the file it stopped in. A drain then
    lists the folder once and looks at each finished file once, not once a batch;
    a file that appears meanwhile is found by the next read that lists."""

    cursor: str | None
    decoded: TranscriptCursor
    files: list[tuple[str, str]] | None
    stopped_at: str | None
    listed: tuple[int, int]  # the listing's counts: outside, unreadable


def _split_lines(block: bytes) -> tuple[list[bytes], bytes]:
    """The lines of ``block`` that end in it, without their newlines, and what
    follows its last newline (a line not ended in it).

    ``bytes.split`` looks at the block a byte at a time; ``BytesIO`` finds each
    newline with ``memchr``: half the time for a block of 1 KiB lines, newlines
    cut off included."""
    lines = io.BytesIO(block).readlines()
    rest = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
    return [line[:-1] for line in lines], rest


def _drop_unencodable(context: dict[str, str]) -> None:
    """Remove context values that are not valid Unicode (a header's lone surrogate):
    the cursor that carries them could not be written."""
    if "".join(context.values()).isascii():
        return  # the common case: one call, no loop
    for key in [key for key, value in context.items() if not storable_text(value)]:
        del context[key]


# The digest line keys are made with: copied, never updated itself.
_LINE_DIGEST = blake2b(digest_size=12)


def line_key(session: str, line: Line) -> str:
    """A dedupe key for a line without an id of its own: session and content digest."""
    return data_key(session, line.data)


def data_key(session: str, data: bytes) -> str:
    """:func:`line_key` of a line's bytes (without its newline), for a
    :data:`LinesParser`, which is handed bytes, not :class:`Line` s."""
    # A copy of a hasher made once costs less than making one with its size.
    digest = _LINE_DIGEST.copy()
    digest.update(data)
    return f"{session}:{digest.hexdigest()}"


def json_string_field(prefix: bytes, field: str) -> str | None:
    """The first ``"field": "value"`` string in ``prefix`` (of an oversized line),
    unescaped; ``None`` when absent. Best effort by design: the line is not parsed."""
    found = re.search(rb'"' + re.escape(field.encode()) + rb'"\s*:\s*"((?:[^"\\]|\\.)*)"',
                      prefix)
    if found is None:
        return None
    try:
        value = msgspec.json.decode(b'"' + found.group(1) + b'"')
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, str) else None


# How long a hook's read of one transcript waits for a tick that holds the step lock
# (seconds); past it the tick, which reads every transcript, is left to do it.
INGEST_LOCK_WAIT_SECONDS = 0.2


def ingest_file(host: Host, source: TranscriptSource, path: str, *, seconds: float
                ) -> int | None:
    """Store the new rows of ``source``'s transcript ``path`` now, batch by batch with
    the source's cursor (as the ingest step stores them), until it is read or
    ``seconds`` are spent; the rest is left to the next tick, and keys make a second
    read add nothing. Returns the rows stored, or ``None`` when nothing was read:
    ``path`` is none of the source's files, or a tick holds the root's step lock
    (and reads every transcript itself)."""
    deadline = time.monotonic() + seconds
    stored = 0
    try:
        with host.step_lock(timeout=min(INGEST_LOCK_WAIT_SECONDS, max(seconds, 0.0))):
            while (left := deadline - time.monotonic()) > 0:
                cursor = host.store.source_cursor(source.name)
                batch = source.read_file(cursor, path, seconds=left)
                if batch is None:
                    return None
                stored += host.store.ingest(source.name, batch, previous=cursor).inserted
                if not batch.more:
                    break
    except LockBusy:
        return None
    return stored


# The agent events after which a session's transcript is read at once, within the
# event's budget; what is left (the agent writes its transcript behind its hooks) waits
# for the next tick, and keys make reading a line twice add nothing.
SESSION_INGEST_EVENTS = frozenset({"Stop", "SessionEnd"})


def ingest_session_transcript(host: Host, source_name: str, event: AgentEvent) -> None:
    """The body of a transcript plugin's ``hostcore_agent_event``: at an event of
    :data:`SESSION_INGEST_EVENTS` from the agent named ``source_name``, store the new
    rows of the session's transcript with that source (:func:`ingest_file`), within the
    event's budget. Any other event, or one naming no transcript, reads nothing."""
    if (event.agent != source_name or event.name not in SESSION_INGEST_EVENTS
            or not event.transcript_path):
        return
    for source in host.sources:
        if source.name == source_name and isinstance(source, TranscriptSource):
            ingest_file(host, source, event.transcript_path, seconds=event.budget_seconds)
