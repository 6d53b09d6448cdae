"""The work-item ledger: one portable JSON record per item, and an index over them.

Layout under the ledger folder (``<root>/ledger``)::

    portable/<slug>.json   one record per work item (the truth; see docs/ledger.md)
    index.sqlite3          a summary of every record, re-derivable, never trusted
    .lock                  serialises writers across processes

A record has sections: ``poll`` (the poller's memory of the item), ``session``,
``control``, ``graph``, ``collaborators`` (owned by other components; kept
verbatim) and ``ended`` (the closure stamp). Sections and fields this version
does not know are kept on rewrite. Every change is one atomic write of the record.

The index answers the poller's candidate queries without opening every record, and
keeps each decision-bearing record's :func:`decision_member` (the export's
``decisions`` identity folds them). It is a hint: the poller re-reads a record
before acting on it. It is validated
against the ``portable`` folder's modification time (every atomic write renames
into that folder, which moves its mtime) and re-synchronised by comparing each
file's size and mtime with what it recorded; only changed files are read. An
index that does not open, fails SQLite's quick check or has another format is
deleted and rebuilt from the records.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from hostcore.atomic import atomic_write, ensure_dir
from hostcore.errors import RecordError
from hostcore.records import encode_json
from hostcore.ref import identity
from hostcore.workitems import WorkItemRef

log = logging.getLogger("hostcore.ledger")

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TIME_SHAPE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
INDEX_FORMAT = 3
# The readable part of a slug is cut to this many characters; the hash makes it unique.
SLUG_PREFIX_LENGTH = 48
# 32 hex digits of SHA-256 (128 bits) of the exact ref.
SLUG_HASH_LENGTH = 32

S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")

# Section bits in the index.
POLL, SESSION, CONTROL, GRAPH, COLLABORATORS, ENDED = 1, 2, 4, 8, 16, 32
TRACKING = SESSION | CONTROL | GRAPH | COLLABORATORS
# The sections that carry a decision (see decision_member).
DECISIONS = CONTROL | SESSION | ENDED

_sorted_json = msgspec.json.Encoder(order="sorted")


def format_utc(moment: datetime) -> str:
    """``moment`` as the ledger's timestamp text (UTC, seconds, ``Z``)."""
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def parse_utc(text: object) -> datetime | None:
    """The moment ``text`` names, or ``None`` unless it is exactly the ledger's format."""
    if not isinstance(text, str) or not _TIME_SHAPE.match(text):
        return None
    try:
        return datetime.fromisoformat(text)  # the shape is checked: only the values remain
    except ValueError:
        return None


class GiveUp(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """The poller stopped re-dispatching an item's event after repeated failures;
    it tries again when the item next changes."""

    at: str = ""
    failures: int = 0


class PollSection(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """``poll``: what the poller remembers about an item.

    ``last_polled_at`` is the last cycle whose listing showed the item (refreshed
    at most every few cycles while it is unchanged), ``closure_checked_at`` the
    last cycle that asked the provider whether the unlisted item ended and was
    not told it had. ``announced_at`` is when the ``opened`` event was delivered,
    ``updated_at`` the provider's change marker of the last version delivered.
    Timestamps are kept as found: one that does not parse is read as "long ago".
    ``more`` holds fields this version does not know.
    """

    last_polled_at: Any = ""
    closure_checked_at: Any = ""
    announced_at: str = ""
    updated_at: str = ""
    seen_comments: list[str] = []
    dispatch_failures: int = 0
    gave_up: GiveUp | None = None
    more: dict[str, Any] = {}


class EndedStamp(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """``ended``: the item closed (or merged) and the ledger recorded it."""

    at: str
    state: str
    state_reason: str = ""
    closed_at: str = ""
    closed_by: str = ""
    more: dict[str, Any] = {}


class PortableRecord(msgspec.Struct, kw_only=True):
    """One work item's record. A section is ``None`` when absent.

    ``session``, ``control``, ``graph`` and ``collaborators`` belong to other
    components and are kept as the JSON objects they are. ``extra`` holds
    top-level sections this version does not know, written back unchanged.
    """

    ref: str
    poll: PollSection | None = None
    session: dict[str, Any] | None = None
    control: dict[str, Any] | None = None
    graph: dict[str, Any] | None = None
    collaborators: dict[str, Any] | None = None
    ended: EndedStamp | None = None
    extra: dict[str, Any] = {}

    @property
    def sections(self) -> int:
        """The index's bit set of the sections present."""
        bits = 0
        for bit, value in ((POLL, self.poll), (SESSION, self.session), (CONTROL, self.control),
                           (GRAPH, self.graph), (COLLABORATORS, self.collaborators),
                           (ENDED, self.ended)):
            if value is not None:
                bits |= bit
        return bits


_OPAQUE = ("session", "control", "graph", "collaborators")
_KNOWN = frozenset(("ref", "poll", "ended", *_OPAQUE))


def absent_since_of(poll: PollSection | None) -> str:
    """The later of ``lastPolledAt`` and ``closureCheckedAt`` that parse; ``""`` if neither.

    Both are :data:`TIME_FORMAT` text, which orders as it reads, so the later is
    the greater string.
    """
    if poll is None:
        return ""
    stamps = [t for t in (poll.last_polled_at, poll.closure_checked_at) if parse_utc(t)]
    return max(stamps, default="")


def record_class(record: PortableRecord) -> str:
    """Which candidate set a record belongs to: ``ended`` (stamped), ``tracked`` (a
    session, control, graph or collaborators section), ``ledger_only`` (poll and
    nothing else known), or ``other`` (no section the poller reads)."""
    bits = record.sections
    if bits & ENDED:
        return "ended"
    if bits & TRACKING:
        return "tracked"
    return "ledger_only" if bits == POLL else "other"


def decision_member(record: PortableRecord) -> str | None:
    """The record's member identity in the fold of decisions, or ``None`` without one.

    A record carries a decision when it has a ``control``, ``session`` or
    ``ended`` section. Its member is ``identity(ref, control, session, ended)``
    over those sections as key-sorted JSON (``null`` when absent), so polling
    traffic (``poll`` and the other sections) never moves it.
    """
    sections = (record.control, record.session, record.ended)
    if all(section is None for section in sections):
        return None
    return identity(record.ref, *(_sorted_json.encode(s).decode() for s in sections))


def slug_for(ref: str) -> str:
    """A file-name-safe, collision-free name for ``ref``, whatever ``ref`` contains.

    A readable prefix (letters, digits, ``_`` and ``-`` only: no separator, no
    dot, so never ``..``), cut to :data:`SLUG_PREFIX_LENGTH`, then a hash of the
    exact ref. Two refs differing in any way, case included, get different slugs.
    """
    digest = hashlib.sha256(ref.encode("utf-8", "surrogatepass")).hexdigest()
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "_", ref)[:SLUG_PREFIX_LENGTH].strip("_-")
    return f"{prefix or 'ref'}-{digest[:SLUG_HASH_LENGTH]}"


def decode_record(data: bytes, *, what: str) -> PortableRecord:
    """Decode one record; :class:`RecordError` naming ``what`` and the field if malformed."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise RecordError(f"{what}: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise RecordError(f"{what}: a record is a JSON object, not {type(raw).__name__}")
    try:
        ref = WorkItemRef.parse(raw.get("ref")).ref
    except ValueError as exc:
        raise RecordError(f"{what}: $.ref: {exc}") from None
    opaque: dict[str, dict[str, Any] | None] = {}
    for name in _OPAQUE:
        value = raw.get(name)
        if value is not None and not isinstance(value, dict):
            raise RecordError(f"{what}: $.{name}: a section is an object, "
                              f"not {type(value).__name__}")
        opaque[name] = value
    return PortableRecord(
        ref=ref,
        poll=_decode_section(raw.get("poll"), PollSection, f"{what}: $.poll"),
        ended=_decode_section(raw.get("ended"), EndedStamp, f"{what}: $.ended"),
        extra={k: v for k, v in raw.items() if k not in _KNOWN},
        **opaque,
    )


def encode_record(record: PortableRecord) -> bytes:
    """The record's JSON: known sections, then the unknown ones kept from reading."""
    out: dict[str, Any] = {"ref": record.ref}
    if record.poll is not None:
        out["poll"] = _encode_section(record.poll)
    for name in _OPAQUE:
        value = getattr(record, name)
        if value is not None:
            out[name] = value
    if record.ended is not None:
        out["ended"] = _encode_section(record.ended)
    out.update((k, v) for k, v in record.extra.items() if k not in _KNOWN)
    return encode_json(out)


def _decode_section(raw: Any, type_: type[S], what: str) -> S | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RecordError(f"{what}: a section is an object, not {type(raw).__name__}")
    names = _field_names(type_)
    try:
        section = msgspec.convert({k: v for k, v in raw.items() if k in names}, type=type_)
    except msgspec.ValidationError as exc:
        raise RecordError(f"{what}: {exc}") from None
    more = {k: v for k, v in raw.items() if k not in names}
    return msgspec.structs.replace(section, more=more) if more else section


def _encode_section(section: msgspec.Struct) -> dict[str, Any]:
    data = msgspec.to_builtins(section)
    data.pop("more", None)
    return {**section.more, **data}  # type: ignore[attr-defined]


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(type_: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(type_)
    if names is None:
        names = frozenset(f.encode_name for f in msgspec.structs.fields(type_)
                          if f.name != "more")
        _FIELD_NAMES[type_] = names
    return names


class IndexEntry(msgspec.Struct, frozen=True):
    """One record as the index summarises it."""

    ref: str
    sections: int
    absent_since: str
    updated_at: str
    last_polled_at: str


class LedgerCounters(msgspec.Struct):
    """Record files read and written by this Ledger object (benchmarks, tests, status)."""

    reads: int = 0
    writes: int = 0
    index_rebuilds: int = 0
    index_resyncs: int = 0


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries (
    slug TEXT PRIMARY KEY,
    ref TEXT NOT NULL,
    sections INTEGER NOT NULL,
    class TEXT NOT NULL,
    absent_since TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_polled_at TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    decision TEXT
);
CREATE INDEX entries_class ON entries (class, absent_since, ref);
CREATE TABLE malformed (slug TEXT PRIMARY KEY, size INTEGER NOT NULL,
                        mtime_ns INTEGER NOT NULL, reason TEXT NOT NULL);
"""


class Ledger:
    """The portable records under ``directory`` (``<root>/ledger``) and their index.

    :param on_event: called as ``on_event(name, **counts)`` for the ledger's own
        telemetry (``ledger.index_rebuilt``); the host wires it to ``host.emit``.
    """

    def __init__(self, directory: Path,
                 on_event: Callable[..., object] | None = None) -> None:
        self.directory = Path(directory)
        self.portable = self.directory / "portable"
        self.index_path = self.directory / "index.sqlite3"
        self.counters = LedgerCounters()
        self._on_event = on_event
        self._db: sqlite3.Connection | None = None
        self._lock_depth = 0

    # -- records -------------------------------------------------------------------

    def path_for(self, ref: str) -> Path:
        """The record file of ``ref``; always directly inside ``portable/``."""
        path = self.portable / f"{slug_for(ref)}.json"
        if path.parent != self.portable:  # slug_for never yields a separator; be sure
            raise RecordError(f"work-item ref {ref[:80]!r} does not map inside the ledger")
        return path

    def read(self, ref: str) -> PortableRecord | None:
        """The record of ``ref``; ``None`` if there is none; :class:`RecordError` if
        the file is malformed or belongs to another ref."""
        path = self.path_for(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        self.counters.reads += 1
        record = decode_record(data, what=str(path))
        if record.ref != ref:
            raise RecordError(f"{path}: $.ref: names {record.ref[:80]!r}, not {ref[:80]!r}")
        return record

    def write(self, record: PortableRecord) -> None:
        """Write ``record`` (one atomic write) and update its index row.

        A record with a decision section is indexed as it reads back from the
        file, exactly as a rebuild would index it (JSON turns int keys into
        strings, for one); one that would not read back raises
        :class:`RecordError` before anything is written.
        """
        path = self.path_for(record.ref)
        data = encode_record(record)
        stored = decode_record(data, what=str(path)) if record.sections & DECISIONS else record
        with self._locked():
            db = self._fresh_index()  # the meta written below must describe a synced index
            atomic_write(path, data)
            self.counters.writes += 1
            stat = path.stat()
            try:
                with db:
                    self._put(db, path.name[:-5], stored, stat.st_size, stat.st_mtime_ns)
                    db.execute("DELETE FROM malformed WHERE slug = ?", (path.name[:-5],))
                    self._set_meta(db, "dir_mtime_ns", str(self.portable.stat().st_mtime_ns))
            except sqlite3.DatabaseError:
                # The record is written; an index that cannot follow is rebuilt next use.
                log.debug("ledger index update failed; it will be rebuilt", exc_info=True)
                self._drop_index()

    def update(self, ref: str,
               change: Callable[[PortableRecord], PortableRecord | None]) -> PortableRecord | None:
        """Apply ``change`` to the record of ``ref`` (a new empty one if absent) and
        write the result, unless ``change`` returns ``None`` (nothing to write).
        A malformed record raises :class:`RecordError` and is left as it is."""
        with self._locked():  # read, change and write as one step across processes
            record = self.read(ref) or PortableRecord(ref=ref)
            changed = change(record)
            if changed is not None:
                self.write(changed)
            return changed

    def iter_records(self) -> Iterator[tuple[str, PortableRecord]]:
        """Every well-formed record as ``(ref, record)``, in file-name order.

        Reads every file; a malformed one is skipped with a debug line.
        """
        if not self.portable.is_dir():
            return
        for name in sorted(os.listdir(self.portable)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = self.portable / name
            try:
                record = self._read_file(path)
            except (OSError, RecordError) as exc:
                log.debug("ledger: skipping %s: %s", name, exc)
                continue
            yield record.ref, record

    def _read_file(self, path: Path) -> PortableRecord:
        data = path.read_bytes()
        self.counters.reads += 1
        record = decode_record(data, what=str(path))
        if f"{slug_for(record.ref)}.json" != path.name:
            raise RecordError(f"{path}: $.ref: {record.ref[:80]!r} belongs in another file")
        return record

    # -- index queries -------------------------------------------------------------

    def entries(self, *, with_bits: int = 0, without_bits: int = 0) -> list[IndexEntry]:
        """Index entries having all of ``with_bits`` and none of ``without_bits``."""
        return self._query(
            "SELECT ref, sections, absent_since, updated_at, last_polled_at FROM entries "
            "WHERE (sections & ?) = ? AND (sections & ?) = 0 ORDER BY ref",
            (with_bits, with_bits, without_bits))

    def tracked(self) -> list[IndexEntry]:
        """Unstamped records with a session, control, graph or collaborators section."""
        return self._query(
            "SELECT ref, sections, absent_since, updated_at, last_polled_at FROM entries "
            "WHERE class = 'tracked' ORDER BY ref", ())

    def ledger_only_due(self, cutoff: str) -> list[IndexEntry]:
        """Unstamped poll-only records whose ``absent_since`` is at or before ``cutoff``
        (an unparsable pair sorts as ``""``: due), longest-absent first, then by ref."""
        return self._query(
            "SELECT ref, sections, absent_since, updated_at, last_polled_at FROM entries "
            "WHERE class = 'ledger_only' AND absent_since <= ? ORDER BY absent_since, ref",
            (cutoff,))

    def decision_members(self) -> dict[str, str]:
        """``{ref: decision_member(record)}`` for every well-formed record carrying a decision.

        One index query: each member was computed when the index last took in
        that version of the file (its size and mtime), so an unchanged ledger reads
        no record, and a changed one reads only the changed files. As fresh as
        every index answer (see the module docstring).
        """
        return self._with_index(lambda db: {
            str(ref): str(member) for ref, member in
            db.execute("SELECT ref, decision FROM entries WHERE decision IS NOT NULL")})

    def entry(self, ref: str) -> IndexEntry | None:
        rows = self._query(
            "SELECT ref, sections, absent_since, updated_at, last_polled_at FROM entries "
            "WHERE slug = ?", (slug_for(ref),))
        return rows[0] if rows and rows[0].ref == ref else None

    def status(self) -> dict[str, int]:
        """Counts for ``hostcore status``: records, ended, tracked, ledger-only, malformed."""

        def counts(db: sqlite3.Connection) -> dict[str, int]:
            by_class = dict(db.execute("SELECT class, COUNT(*) FROM entries GROUP BY class"))
            return {
                "records": sum(by_class.values()),
                "ended": by_class.get("ended", 0),
                "tracked": by_class.get("tracked", 0),
                "ledger_only": by_class.get("ledger_only", 0),
                "malformed": int(db.execute("SELECT COUNT(*) FROM malformed").fetchone()[0]),
            }

        return self._with_index(counts)

    def rebuild_index(self, reason: str = "requested") -> int:
        """Delete the index and derive it again from every record; returns records indexed."""
        with self._locked():
            self._drop_index()
            self._rebuild(reason)
            return self._index().execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- index maintenance -----------------------------------------------------------

    def _query(self, sql: str, args: tuple[Any, ...]) -> list[IndexEntry]:
        return self._with_index(lambda db: [
            IndexEntry(str(r), int(s), str(a), str(u), str(p))
            for r, s, a, u, p in db.execute(sql, args)])

    def _with_index(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``read`` on the fresh index; an index that fails it is rebuilt once."""
        try:
            return read(self._fresh_index())
        except (sqlite3.DatabaseError, ValueError, TypeError):
            # Rows the index should never hold: it is damaged. Derive it again.
            log.debug("ledger index unreadable; rebuilding", exc_info=True)
            with self._locked():
                self._drop_index()
                self._rebuild("damaged")
            return read(self._fresh_index())

    def _fresh_index(self) -> sqlite3.Connection:
        """The index, re-synchronised first if the folder changed since it was written."""
        db = self._index()
        if self._meta(db, "dir_mtime_ns") != str(self._dir_mtime()):
            with self._locked():
                db = self._index()
                if self._meta(db, "dir_mtime_ns") != str(self._dir_mtime()):
                    self._resync(db)
        return db

    def _index(self) -> sqlite3.Connection:
        """The open index; opened, validated (rebuilt if damaged) on first use."""
        if self._db is not None:
            return self._db
        ensure_dir(self.portable)
        reason = "missing" if not self.index_path.exists() else None
        if reason is None:
            try:
                db = self._connect()
                ok = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
                fmt = self._meta(db, "format")
                if ok and fmt == str(INDEX_FORMAT):
                    self._db = db
                    return db
                db.close()
                reason = "damaged" if not ok else "format"
            except sqlite3.DatabaseError:
                reason = "damaged"
        log.debug("ledger index %s; rebuilding from the records", reason)
        self._drop_index()
        return self._rebuild(reason)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.index_path, isolation_level=None, timeout=30)
        db.isolation_level = "DEFERRED"
        # Re-derivable: durability is the records' job, so no fsync per update.
        db.execute("PRAGMA synchronous = OFF")
        return db

    def _rebuild(self, reason: str) -> sqlite3.Connection:
        db = self._connect()
        with db:
            db.executescript(_SCHEMA)
            self._set_meta(db, "format", str(INDEX_FORMAT))
        self._db = db
        self._resync(db)
        self.counters.index_rebuilds += 1
        if self._on_event is not None:
            records = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            malformed = db.execute("SELECT COUNT(*) FROM malformed").fetchone()[0]
            self._on_event("ledger.index_rebuilt", records=records, malformed=malformed,
                           reason=reason)
        return db

    def _resync(self, db: sqlite3.Connection) -> None:
        """Bring the index in line with ``portable/``, reading only changed files."""
        dir_mtime = self._dir_mtime()  # before the scan: a change during it shows next time
        known = {slug: (size, mtime) for slug, size, mtime in
                 db.execute("SELECT slug, size, mtime_ns FROM entries")}
        bad = {slug: (size, mtime) for slug, size, mtime in
               db.execute("SELECT slug, size, mtime_ns FROM malformed")}
        present: set[str] = set()
        with db:
            with os.scandir(self.portable) as scan:
                for item in scan:
                    if not item.name.endswith(".json") or item.name.startswith("."):
                        continue
                    slug = item.name[:-5]
                    try:
                        stat = item.stat()
                    except FileNotFoundError:
                        continue
                    present.add(slug)
                    stamp = (stat.st_size, stat.st_mtime_ns)
                    if known.get(slug) == stamp or bad.get(slug) == stamp:
                        continue
                    self._index_file(db, Path(item.path), slug, stamp)
            for slug in (known.keys() | bad.keys()) - present:
                db.execute("DELETE FROM entries WHERE slug = ?", (slug,))
                db.execute("DELETE FROM malformed WHERE slug = ?", (slug,))
            self._set_meta(db, "dir_mtime_ns", str(dir_mtime))
        self.counters.index_resyncs += 1

    def _index_file(self, db: sqlite3.Connection, path: Path, slug: str,
                    stamp: tuple[int, int]) -> None:
        try:
            record = self._read_file(path)
        except (OSError, RecordError) as exc:
            log.debug("ledger: skipping malformed record %s: %s", path.name, exc)
            db.execute("DELETE FROM entries WHERE slug = ?", (slug,))
            db.execute("INSERT OR REPLACE INTO malformed VALUES (?, ?, ?, ?)",
                       (slug, *stamp, type(exc).__name__))
            return
        db.execute("DELETE FROM malformed WHERE slug = ?", (slug,))
        self._put(db, slug, record, *stamp)

    @staticmethod
    def _put(db: sqlite3.Connection, slug: str, record: PortableRecord, size: int,
             mtime_ns: int) -> None:
        poll = record.poll
        last = poll.last_polled_at if poll and isinstance(poll.last_polled_at, str) else ""
        db.execute(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (slug, record.ref, record.sections, record_class(record), absent_since_of(poll),
             poll.updated_at if poll else "", last, size, mtime_ns, decision_member(record)))

    def _drop_index(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.index_path}{suffix}")

    def _dir_mtime(self) -> int:
        return ensure_dir(self.portable).stat().st_mtime_ns

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise index maintenance and record writes across processes.

        Re-entrant within this object: a second flock on a new descriptor in the
        same process would wait for the first forever.
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        ensure_dir(self.directory)
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_depth = 1
            yield
        finally:
            self._lock_depth = 0
            os.close(fd)


class PollState:
    """The ``poll`` sections of a :class:`Ledger`, as the poller reads and writes them.

    Every method that changes a record flushes it at once: one atomic write.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self, ref: str) -> PollSection | None:
        record = self.ledger.read(ref)
        return None if record is None else record.poll

    def absent_since(self, ref: str) -> str:
        """The later of ``lastPolledAt`` and ``closureCheckedAt`` (``""`` when neither
        parses, which the poller reads as due)."""
        return absent_since_of(self.get(ref))

    def note_closure_check(self, ref: str, checked_at: str) -> None:
        """Record that the provider was asked about ``ref`` and did not say it closed.

        Writes ``closureCheckedAt`` and nothing else, in one write. A record with no
        ``poll`` section (or none at all) is left alone.
        """

        def stamp(record: PortableRecord) -> PortableRecord | None:
            if record.poll is None:
                return None
            poll = msgspec.structs.replace(record.poll, closure_checked_at=checked_at)
            return msgspec.structs.replace(record, poll=poll)

        self.ledger.update(ref, stamp)

    def forget(self, ref: str) -> None:
        """Drop the ``poll`` section of ``ref``; the rest of the record stays."""

        def drop(record: PortableRecord) -> PortableRecord | None:
            if record.poll is None:
                return None
            return msgspec.structs.replace(record, poll=None)

        self.ledger.update(ref, drop)
