"""Portable work-item records: one JSON file per item, and how it reads and writes.

A record has sections: ``poll`` (the poller's memory of the item), ``session``,
``control``, ``graph``, ``collaborators`` (owned by other components; kept
verbatim) and ``ended`` (the closure stamp). Sections and fields this version
does not know are kept on rewrite. Timestamps are :mod:`hostcore.timestamps`
text in ``seconds`` form; one that does not parse is read as "long ago".
"""

from __future__ import annotations

import re
from typing import Any, Protocol, TypeVar

import msgspec

from hostcore.errors import RecordError
from hostcore.export.ref import identity, sha256_hex
from hostcore.records import encode_json
from hostcore.timestamps import parse_exact
from hostcore.workitems.backoff import Backoff
from hostcore.workitems.items import WorkItemRef

# The readable part of a slug is cut to this many characters; the hash makes it unique.
SLUG_PREFIX_LENGTH = 48
# 32 hex digits of SHA-256 (128 bits) of the exact ref.
SLUG_HASH_LENGTH = 32

S = TypeVar("S", bound=msgspec.Struct)

# Section bits in the index.
POLL, SESSION, CONTROL, GRAPH, COLLABORATORS, ENDED = 1, 2, 4, 8, 16, 32
TRACKING = SESSION | CONTROL | GRAPH | COLLABORATORS
# The sections that carry a decision (see decision_member).
DECISIONS = CONTROL | SESSION | ENDED

_sorted_json = msgspec.json.Encoder(order="sorted")


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
    ``backoff`` is set while the provider's answers about the item fail (see
    :mod:`hostcore.workitems.backoff`). ``kind`` and ``labels`` are what the last
    listing written said of the item (``issue`` or ``pull_request``; its labels):
    a record written before they were kept has neither, read as an unknown kind
    and no labels until the poller next writes it.
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
    backoff: Backoff | None = None
    kind: str = ""
    labels: list[str] = []
    more: dict[str, Any] = {}


class EndedStamp(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """``ended``: the item closed (or merged, or moved) and the ledger recorded it.

    ``moved_to`` is set when ``state`` is ``moved``: the ref the item lives under now.
    ``kind`` and ``labels`` are the item's as ``poll`` last had them: the close path
    forgets ``poll``, and an ended item is still found by its kind and labels. A
    stamp written before they were kept has neither (an unknown kind, no labels).
    """

    at: str
    state: str
    state_reason: str = ""
    closed_at: str = ""
    closed_by: str = ""
    moved_to: str = ""
    kind: str = ""
    labels: list[str] = []
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


def absent_since_of(poll: PollSection | None, horizon: str = "") -> str:
    """The later of ``lastPolledAt`` and ``closureCheckedAt`` that parse; ``""`` if neither.

    Both are :mod:`hostcore.timestamps` ``seconds`` text, which orders as it reads, so the later is
    the greater string. With ``horizon`` (same form), a stamp later than it counts as
    not parsing: a clock that ran ahead wrote it, and trusting it would put the record
    off until the real clock caught up.
    """
    if poll is None:
        return ""
    stamps = [t for t in (poll.last_polled_at, poll.closure_checked_at)
              if parse_exact(t) and not (horizon and t > horizon)]
    return max(stamps, default="")


def without_future(poll: PollSection, horizon: str) -> PollSection:
    """``poll`` with each scheduling stamp later than ``horizon`` cleared: the repair
    the poller makes on its next write of a record a wrong clock dated ahead."""
    changes = {name: "" for name in ("last_polled_at", "closure_checked_at")
               if isinstance(value := getattr(poll, name), str) and parse_exact(value)
               and value > horizon}
    return msgspec.structs.replace(poll, **changes) if changes else poll


def with_backoff(record: PortableRecord, backoff: Backoff | None) -> PortableRecord | None:
    """``record`` with ``poll.backoff`` set to ``backoff`` (a ``poll`` section made for
    it when there is none and ``backoff`` is set); ``None`` when nothing changes."""
    poll = record.poll
    if (poll.backoff if poll is not None else None) == backoff:
        return None
    return msgspec.structs.replace(
        record, poll=msgspec.structs.replace(poll or PollSection(), backoff=backoff))


def retry_at_of(record: PortableRecord) -> str:
    """When an unstamped record whose question failed, and whose failure stands, is
    asked again (its ``nextAskAt``, or its ``failedAt`` when that is empty); ``""``
    for every other record. The index keeps it so a cycle counts standing failures
    in one query."""
    backoff = backoff_of(record)
    if record.ended is not None or backoff is None or backoff.final or not backoff.failures:
        return ""
    return backoff.next_ask_at or backoff.failed_at or "?"


def backoff_of(record: PortableRecord | None) -> Backoff | None:
    """The record's ``poll.backoff``, if it has one."""
    return record.poll.backoff if record is not None and record.poll is not None else None


def kind_and_labels(record: PortableRecord) -> tuple[str, list[str]]:
    """The item's kind and labels: its ``poll`` section's while it has one, else its
    ``ended`` stamp's (the close path moved them there before forgetting ``poll``);
    ``("", [])`` when neither says."""
    if record.poll is not None:
        return record.poll.kind, record.poll.labels
    if record.ended is not None:
        return record.ended.kind, record.ended.labels
    return "", []


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
    digest = sha256_hex(ref.encode("utf-8", "surrogatepass"))
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


class _Section(Protocol):
    more: dict[str, Any]  # the keys a newer hostcore wrote, kept as they were


def _encode_section(section: _Section) -> dict[str, Any]:
    data = msgspec.to_builtins(section)
    data.pop("more", None)
    return {**section.more, **data}


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(type_: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(type_)
    if names is None:
        names = frozenset(f.encode_name for f in msgspec.structs.fields(type_)
                          if f.name != "more")
        _FIELD_NAMES[type_] = names
    return names
