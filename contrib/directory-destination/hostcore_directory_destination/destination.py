"""A folder that receives the export stream: append-only JSONL segments and published refs.

Layout under the destination folder::

    .instance                             this folder's instance id, created with it
    <stream>/.lock                        serialises pushes (flock), across processes
    <stream>/<origin>/ref.json            the governance identities published for <origin>
    <stream>/<origin>/<first>.jsonl       segments of rows from one store, in position order

``<origin>`` is the identity of the store the rows came from (positions of two
stores are two feeds, so several hosts can forward into one folder), and
``<first>`` the 20-digit position of the segment's first row. A segment is
only ever appended to; the next push after it reaches ``segment_bytes`` starts a
new one. Governance is kept per origin too: hosts sharing the folder never
write over each other's identities.

Each line is one ``hostcore.export.ExportRow`` encoded as a JSON array, its
fields in this order (``hostcore.export.EXPORT_ROW_FIELDS``)::

    [position, partition, source_id, session_id, ts, directory, git_remote, payload, key]

``payload`` is the row's JSON object as stored, ``key`` a string or ``null``.
An array rather than an object because the names would otherwise repeat on
every line: about 30% of the bytes written. :meth:`DirectoryDestination.read_rows`
reads the rows back as ``ExportRow`` values.

Identity. ``.instance`` holds a random id written (create-only) by the first
push into an empty folder. A folder deleted and re-created answers a new id; a
backup copied back answers the old id but an older position. Every push checks,
under the lock and before writing, that the folder is the instance, at the
position, the pusher resumed from (``hostcore.export.batch.check_continuity``),
and refuses with ``DestinationChanged`` otherwise; files that vanish during a
push (the folder was deleted under it) are refused the same way. Segments that
exist are appended to without ``O_CREAT`` and new ones are created exclusively,
so a deleted segment is never silently re-created holding only later rows.

Durability and recovery. A push writes its rows and syncs (fdatasync) the
segment (and the folder when it created the segment), then replaces the
origin's ``ref.json`` if the push changed governance, and only then returns.
The last complete line of an origin's newest segment is therefore the durable
position, and it is the truth: ``published`` reads it from the tail of one file,
and a push, under the lock, first cuts a torn final line (a write killed
midway) and removes a segment left with no complete line. Rows at or below the
position are dropped on append, so a rerun after a kill neither loses nor
duplicates a row. Recovery reads backwards from the end of one segment only.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from hostcore.errors import HostcoreError
from hostcore.export.batch import (
    DestinationChanged,
    ExportBatch,
    ExportRow,
    apply_governance,
    check_continuity,
)
from hostcore.export.ref import Ref
from hostcore.files import STATE_FILE_MODE, atomic_write, ensure_dir, file_lock, fsync_dir

# A segment is closed at the first push after it reaches this size.
SEGMENT_BYTES = 64 * 1024 * 1024
# Bytes read per step while looking backwards for the last complete line.
TAIL_CHUNK_BYTES = 64 * 1024

REF_FILE = "ref.json"
LOCK_FILE = ".lock"
INSTANCE_FILE = ".instance"
_INSTANCE = re.compile(r"^[0-9a-f]{32}$")
SEGMENT_SUFFIX = ".jsonl"
# Streams and origins become folder names: one plain path component, nothing more.
_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_encoder = msgspec.json.Encoder()


class DestinationError(HostcoreError):
    """The folder holds something this destination will not guess about."""


class _Position(msgspec.Struct, array_like=True):
    """The first element of a row's array; the rest of the line is only checked to parse."""

    position: int


_row_decoder = msgspec.json.Decoder(ExportRow)


class Recovery(msgspec.Struct):
    """What opening an origin's tail found (counts for telemetry and benchmarks)."""

    bytes_read: int = 0
    torn_bytes: int = 0
    segments_dropped: int = 0


class _Tail(msgspec.Struct):
    segment: Path | None = None
    size: int = 0
    position: int = 0
    recovery: Recovery = msgspec.field(default_factory=Recovery)


class DirectoryDestination:
    """The export stream appended to JSONL segments under ``path``.

    :param path: the destination folder, or ``None`` when not configured (the
        destination then reports itself unavailable and refuses to push).
    :param segment_bytes: the size at which a segment is closed.
    :param on_recover: called with a :class:`Recovery` whenever a push had to cut
        a torn line or drop an empty segment.
    """

    name = "directory"

    def __init__(self, path: Path | None, *, segment_bytes: int = SEGMENT_BYTES,
                 on_recover: Callable[[Recovery], None] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.key = f"directory:{self.path}"
        self.segment_bytes = segment_bytes
        self.on_recover = on_recover
        self.last_recovery = Recovery()

    def availability(self) -> str | None:
        if self.path is None:
            return ("no folder configured: set [plugins.directory-destination] path "
                    "(exporting is opt-in, since rows leave the store)")
        return None

    def status(self) -> dict[str, int]:
        """Segments and bytes held, over every stream and origin."""
        segments = list(self._all_segments())
        return {"segments": len(segments), "bytes": sum(p.stat().st_size for p in segments)}

    # -- the Destination protocol -----------------------------------------------

    def instance(self) -> str:
        """This folder's instance id; ``""`` before the first push created it."""
        if self.path is None:
            return ""
        return _read_instance(self.path / INSTANCE_FILE)

    def published(self, stream: str, origin: str) -> Ref:
        """The ref published for ``origin``'s ``stream``; content is its durable position.

        Reads only: a torn final line is skipped here, and cut by the next push.
        """
        origin_dir = self._origin_dir(stream, origin)
        held = self._read_ref(origin_dir)
        tail = self._tail(origin_dir, repair=False)
        return msgspec.structs.replace(held, content=tail.position)

    def push(self, batch: ExportBatch) -> Ref:
        """Apply ``batch`` (see ``hostcore.plugin.registration.Destination``); the new ref."""
        stream_dir = self._stream_dir(batch.stream)
        origin_dir = self._origin_dir(batch.stream, batch.origin)
        try:
            with file_lock(stream_dir / LOCK_FILE):
                return self._push_locked(batch, origin_dir)
        except FileNotFoundError:
            # A file or folder this push relied on vanished under it: the folder
            # was deleted (or swapped) meanwhile, and what was written may be gone.
            raise DestinationChanged(batch.destination, "", batch.after, -1) from None

    def _push_locked(self, batch: ExportBatch, origin_dir: Path) -> Ref:
        assert self.path is not None  # _stream_dir refused an unconfigured folder
        instance = self._ensure_instance()
        tail = self._tail(origin_dir, repair=True)
        self.last_recovery = tail.recovery
        if self.on_recover is not None and (tail.recovery.torn_bytes
                                            or tail.recovery.segments_dropped):
            self.on_recover(tail.recovery)
        check_continuity(batch, instance, tail.position)  # before any write
        held = self._read_ref(origin_dir)
        governed = apply_governance(held, batch)  # raises Conflict before any write
        rows = _rows_past(batch.rows, tail.position)
        if rows:
            self._append(origin_dir, tail, rows)
        if governed != held:
            ensure_dir(origin_dir)
            atomic_write(origin_dir / REF_FILE, _encoder.encode(governed))
        return msgspec.structs.replace(governed, content=tail.position)

    def _ensure_instance(self) -> str:
        """The folder's instance id, created (create-only, durably) if it has none."""
        assert self.path is not None
        path = self.path / INSTANCE_FILE
        found = _read_instance(path)
        if found:
            return found
        ensure_dir(self.path)
        created = uuid.uuid4().hex
        import tempfile  # only a first push creates the id; a cold start does not pay

        fd, tmp = tempfile.mkstemp(prefix=f"{INSTANCE_FILE}.", suffix=".tmp", dir=self.path)
        try:
            try:
                os.write(fd, f"{created}\n".encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # create-only: two first pushes agree on one id
            except FileExistsError:
                return _read_instance(path)
            fsync_dir(self.path)
        finally:
            os.unlink(tmp)
        return created

    # -- reading what it holds ---------------------------------------------------

    def segments(self, stream: str, origin: str) -> list[Path]:
        """``origin``'s segments of ``stream``, oldest first."""
        origin_dir = self._origin_dir(stream, origin)
        if not origin_dir.is_dir():
            return []
        return sorted(origin_dir.glob(f"*{SEGMENT_SUFFIX}"))

    def read_rows(self, stream: str, origin: str) -> Iterator[ExportRow]:
        """The rows held from ``origin`` for ``stream``, in the order they were appended.

        Reads without locking or repairing, one line at a time. A final line
        without its newline is not durable (a write under way, or torn by a kill
        and cut by the next push) and is not returned. A complete line that is
        not a row raises :class:`DestinationError` naming the segment and line.
        """
        for segment in self.segments(stream, origin):
            with open(segment, "rb") as handle:
                for number, line in enumerate(handle, start=1):
                    if not line.endswith(b"\n"):
                        break
                    try:
                        yield _row_decoder.decode(line)
                    except msgspec.DecodeError as exc:
                        raise DestinationError(f"{segment}: line {number} is not an exported "
                                               f"row ({exc})") from None

    def _all_segments(self) -> Iterator[Path]:
        if self.path is None or not self.path.is_dir():
            return iter(())
        return self.path.glob(f"*/*/*{SEGMENT_SUFFIX}")

    # -- internals ----------------------------------------------------------------

    def _stream_dir(self, stream: str) -> Path:
        if self.path is None:
            raise DestinationError(self.availability() or "no folder configured")
        return self.path / _component("stream", stream)

    def _origin_dir(self, stream: str, origin: str) -> Path:
        return self._stream_dir(stream) / _component("origin", origin)

    def _read_ref(self, origin_dir: Path) -> Ref:
        path = origin_dir / REF_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return Ref()
        try:
            ref = msgspec.json.decode(data, type=Ref)
        except msgspec.DecodeError as exc:
            raise DestinationError(f"{path}: not a published ref ({exc}); fix or remove "
                                   "it by hand, this destination will not guess") from None
        return msgspec.structs.replace(ref, content=0)

    def _tail(self, origin_dir: Path, *, repair: bool) -> _Tail:
        """The newest complete row of ``origin_dir``; with ``repair``, cut what is torn."""
        recovery = Recovery()
        if not origin_dir.is_dir():
            return _Tail(recovery=recovery)
        for segment in sorted(origin_dir.glob(f"*{SEGMENT_SUFFIX}"), reverse=True):
            size = segment.stat().st_size
            line, end, read = _last_line(segment, size)
            recovery.bytes_read += read
            if end < size and repair:
                with open(segment, "r+b") as handle:
                    handle.truncate(end)
                    os.fsync(handle.fileno())
                recovery.torn_bytes += size - end
                size = end
            if line is None:
                if repair:
                    segment.unlink()
                    fsync_dir(origin_dir)
                    recovery.segments_dropped += 1
                continue
            try:
                position = msgspec.json.decode(line, type=_Position).position
            except msgspec.DecodeError:
                raise DestinationError(f"{segment}: the last complete line is not an exported "
                                       "row; refusing to guess the position") from None
            return _Tail(segment, size, position, recovery)
        return _Tail(recovery=recovery)

    def _append(self, origin_dir: Path, tail: _Tail, rows: list[ExportRow]) -> None:
        data = _encoder.encode_lines(rows)
        created = tail.segment is None or tail.size >= self.segment_bytes
        segment = tail.segment
        # An existing segment is opened without O_CREAT and a new one exclusively:
        # if the folder was emptied under this push, the open fails rather than
        # re-create a segment holding only the rows after a gap.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        if segment is None or created:
            ensure_dir(origin_dir)
            segment = origin_dir / f"{rows[0].position:020d}{SEGMENT_SUFFIX}"
            flags |= os.O_CREAT | os.O_EXCL
            tail.size = 0
        with open(os.open(segment, flags, STATE_FILE_MODE), "wb") as handle:
            handle.write(data)
            handle.flush()
            _sync_data(handle.fileno())
        if created:
            fsync_dir(origin_dir)
        tail.segment = segment
        tail.size += len(data)
        tail.position = rows[-1].position


# Appends need their data and the new size on disk, not the modification time:
# fdatasync does exactly that where the platform has it.
_sync_data = getattr(os, "fdatasync", os.fsync)


def _read_instance(path: Path) -> str:
    """The instance id in ``path``; ``""`` when there is none yet."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise DestinationError(f"{path}: cannot be read ({type(exc).__name__}); this "
                               "destination will not guess its identity") from None
    if not _INSTANCE.match(text):
        raise DestinationError(f"{path}: not an instance id; remove it by hand only if this "
                               "folder is a new destination (the export then starts over)")
    return text


def _component(what: str, value: str) -> str:
    if not isinstance(value, str) or not _COMPONENT.match(value) or ".." in value:
        raise DestinationError(f"{what} {value!r}: expected a short name of letters, digits, "
                               "'.', '_' and '-'")
    return value


def _rows_past(rows: list[ExportRow], position: int) -> list[ExportRow]:
    """The rows after ``position``, checked to ascend; rows at or below it are dropped."""
    start = 0
    while start < len(rows) and rows[start].position <= position:
        start += 1
    last = position
    for row in rows[start:] if start else rows:
        if row.position <= last:
            raise DestinationError(f"batch rows are not in ascending position order at "
                                   f"position {row.position}; nothing was written")
        last = row.position
    return rows[start:] if start else rows


def _last_line(path: Path, size: int) -> tuple[bytes | None, int, int]:
    """(last complete line or None, offset just past it, bytes read), reading backwards."""
    buf, start, newline = b"", size, -1
    with open(path, "rb") as handle:
        while True:
            if newline < 0:
                found = buf.rfind(b"\n")
                if found >= 0:
                    newline = start + found
            if newline >= 0:
                previous = buf.rfind(b"\n", 0, newline - start)
                if previous >= 0 or start == 0:
                    return buf[previous + 1:newline - start], newline + 1, size - start
            elif start == 0:
                return None, 0, size
            begin = max(0, start - TAIL_CHUNK_BYTES)
            handle.seek(begin)
            buf = handle.read(start - begin) + buf
            start = begin
