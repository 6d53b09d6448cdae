"""Export: push the rows the export seam permits to a destination, resumably.

The export stream is the store's feed as the seam shows it: every row the live
withholding policy permits, in position order. A push hands a destination one
:class:`ExportBatch`; the destination appends the rows it does not already hold
(positions at or below its own are dropped) and returns the :class:`Ref` it now
publishes. The destination's durable position is the truth: every run starts
from ``destination.published(stream, origin).content``, so a run killed at any
point is resumed by running again, and it re-reads from the seam at most the
two batches that were not yet durable (one being pushed, one being read).

The host's own ref for the stream (:func:`local_ref`):

* ``content``: the export feed position, the position of the last row the seam
  permits;
* ``context``: ``host.seam.export_policy_fingerprint()``;
* ``terms``: the identity of the event catalog and the record schemas in force;
* ``decisions``: a fold over the ledger records that carry a decision (a
  ``control``, ``session`` or ``ended`` section); poll-only records are left out.

Governance travels with content but is asserted on its own (per component
compare-and-swap, :func:`hostcore.export.ref.assert_component`): a push that moves only
the position asserts nothing, so content traffic never manufactures a conflict.
When the host's identity for a component differs from the one its last contact
established (the ref cache), the next push carries the change and asserts the
value it last saw there; a destination that has moved since refuses it with a
:class:`~hostcore.export.ref.Conflict`, and no retry of the same write resolves that.
Rows already forwarded are never retracted when the policy changes.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import msgspec

from hostcore.errors import ConfigError
from hostcore.export.batch import EXPORT_COLUMNS, ExportBatch, ExportRow
from hostcore.export.ref import (
    DEFAULT_STREAM,
    GOVERNANCE,
    Conflict,
    Divergence,
    Ref,
    compare,
    fold,
    identity,
)
from hostcore.export.refcache import CachedRefs, RefCache

if TYPE_CHECKING:
    from hostcore.host import Host

# Rows per push. Each push ends in a durable write (an fsync); larger batches
# measured no faster but hold more memory. A kill costs at most two batches of
# seam re-reads (one pushing, one being read), a few MB: under one segment.
BATCH_ROWS = 10_000
# Rows ``status`` counts through the seam before it reports "at least" this many.
STATUS_COUNT_ROWS = 100_000

_sorted_json = msgspec.json.Encoder(order="sorted")


# -- the host's own ref ------------------------------------------------------------


def terms_identity(host: Host) -> str:
    """The identity of the event catalog and record schemas in force."""
    members: dict[str, str] = {}
    for spec in host.catalog:
        attrs = [f"{name}={_attr_kind(kind)}" for name, kind in sorted(spec.attributes.items())]
        members[f"event:{spec.name}"] = identity(spec.name, *attrs)
    for name, schema_type in _record_schemas().items():
        schema = _sorted_json.encode(msgspec.json.schema(schema_type)).decode()
        members[f"schema:{name}"] = identity(name, schema)
    return fold(members)


def _attr_kind(kind: Any) -> str:
    if isinstance(kind, tuple):
        return "enum(" + "|".join(kind) + ")"
    return getattr(kind, "__name__", str(kind))


def _record_schemas() -> dict[str, type]:
    from hostcore.workitems.ledger import PortableRecord

    return {"export-row": ExportRow, "ledger-record": PortableRecord}


def decisions_identity(host: Host) -> str:
    """A fold over the ledger records that carry a decision, keyed by work-item ref.

    A record counts when it has a ``control``, ``session`` or ``ended`` section;
    its member identity (:func:`hostcore.workitems.ledger.decision_member`) covers exactly
    those sections, so polling traffic (``poll`` and the other sections) never
    moves it. The members come from the ledger's index, which keeps each one
    beside the file version it was computed from: an unchanged ledger costs one
    index query, not a read of every record.
    """
    return fold(host.ledger.decision_members())


def local_governance(host: Host) -> Ref:
    """The governance identities this host holds for its export stream (no position)."""
    return Ref(
        context=host.seam.export_policy_fingerprint(),
        terms=terms_identity(host),
        decisions=decisions_identity(host),
    )


def local_ref(host: Host, after: int = 0, *, count_limit: int = STATUS_COUNT_ROWS) -> Ref:
    """The host's ref for its export stream; see :func:`pending_rows` for the position."""
    _, last = pending_rows(host, after, count_limit=count_limit)
    return msgspec.structs.replace(local_governance(host), content=last)


def pending_rows(host: Host, after: int, *, count_limit: int = STATUS_COUNT_ROWS,
                 ) -> tuple[int, int]:
    """(permitted rows past ``after``, position of the last of them).

    Counting stops at ``count_limit`` rows; the position is then the store's
    head, an upper bound. With no row past ``after`` the position is ``after``.
    """
    rows = host.seam.read_rows_since_sync(None, after, ())
    count, last = 0, after
    with contextlib.closing(rows):
        for (position,) in rows:
            count, last = count + 1, position
            if count >= count_limit:
                return count, max(last, host.store.head_position())
    return count, last


# -- destinations ------------------------------------------------------------------


class ExportSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[plugins.export]``: which registered destination to push to when several are."""

    destination: str | None = None


def destination_key(destination: Any) -> str:
    """What the ref cache is keyed by: ``destination.key`` when defined, else its name."""
    return str(getattr(destination, "key", None) or destination.name)


def select_destination(host: Host, name: str | None = None) -> Any:
    """The destination to export to, or :class:`ConfigError` saying why there is none.

    ``name``, else ``[plugins.export] destination``, else the one available
    destination. Several available and none named is an error, not a guess.
    """
    name = name or host.plugin_config("export", ExportSettings).destination
    registered = {d.name: d for d in host.destinations}
    if name is not None:
        if name not in registered:
            known = ", ".join(sorted(registered)) or "none"
            raise ConfigError(f"export destination {name!r} is not registered "
                              f"(registered: {known})")
        reason = _unavailable(registered[name])
        if reason is not None:
            raise ConfigError(f"export destination {name!r} is unavailable: {reason}")
        return registered[name]
    reasons = {n: _unavailable(d) for n, d in registered.items()}
    available = [n for n, reason in reasons.items() if reason is None]
    if len(available) == 1:
        return registered[available[0]]
    if available:
        raise ConfigError(f"several export destinations are available ({', '.join(available)}); "
                          "name one with [plugins.export] destination")
    if not registered:
        raise ConfigError("no export destination is registered; install one, such as "
                          "hostcore-directory-destination")
    why = "; ".join(f"{n}: {r}" for n, r in reasons.items())
    raise ConfigError(f"no export destination is available ({why})")


def _unavailable(destination: Any) -> str | None:
    check = getattr(destination, "availability", None)
    return check() if callable(check) else None


# -- the engine --------------------------------------------------------------------


class ExportSummary(msgspec.Struct, kw_only=True):
    """What one export run did.

    ``done`` is true when the run reached the end of the feed; ``carried`` names
    the governance components this run set at the destination.
    """

    destination: str
    stream: str
    rows: int = 0
    batches: int = 0
    position: int = 0
    carried: list[str] = msgspec.field(default_factory=list)
    done: bool = False
    positions_dropped: bool = False


Progress = Callable[[ExportSummary], None]


class Exporter:
    """Pushes one stream of the host's export to one destination.

    :param batch_rows: rows per push (default :data:`BATCH_ROWS`).
    """

    def __init__(self, host: Host, destination: Any, *, stream: str = DEFAULT_STREAM,
                 batch_rows: int = BATCH_ROWS) -> None:
        if batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        self.host = host
        self.destination = destination
        self.stream = stream
        self.batch_rows = batch_rows
        self.cache = RefCache(host.root)

    def run(self, *, max_rows: int | None = None, adopt: bool = False,
            progress: Progress | None = None) -> ExportSummary:
        """Push rows from the destination's position until the feed ends or
        ``max_rows`` were pushed. Raises :class:`Conflict` if a governance change
        this host carries meets a destination that moved.

        ``adopt`` first records the identities the destination publishes as the
        last contact: the explicit resolution of a conflict, after which this
        host's own identities are written over them.
        """
        origin = self.host.store.instance_id
        cached = self.cache.load(destination_key(self.destination))
        summary = ExportSummary(destination=self.destination.name, stream=self.stream)
        summary.positions_dropped = cached.bind_store(origin)
        published = self.destination.published(self.stream, origin)
        observed = cached.ref(self.stream)
        if adopt:
            observed = msgspec.structs.replace(published, content=observed.content)
        summary.position = published.content
        local = local_governance(self.host)
        sets = Ref(**{c: getattr(local, c) for c in GOVERNANCE
                      if getattr(local, c) != getattr(observed, c)})
        expect = Ref(**{c: getattr(observed, c) for c in GOVERNANCE if getattr(sets, c)})
        limit = max_rows if max_rows is not None else float("inf")
        rows = self.host.seam.read_rows_since_sync(None, summary.position, EXPORT_COLUMNS)
        read = 0
        # One push in flight while the next batch is read and built: the
        # destination's encoding, writes and fsyncs overlap the seam's reads. Rows
        # are built on this thread, so the pusher holds the GIL only to encode.
        in_flight: tuple[Future[Ref], int, Ref] | None = None
        try:
            with contextlib.closing(rows), ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="hostcore-export") as pusher:
                while True:
                    size = int(min(self.batch_rows, limit - read))
                    chunk = _next_rows(rows, size) if size else []
                    read += len(chunk)
                    if in_flight is not None:
                        observed = self._settle(*in_flight, summary, cached, observed, progress)
                        in_flight = None
                    if not chunk and sets == Ref():
                        summary.done = size > 0
                        break
                    batch = ExportBatch(stream=self.stream, origin=origin, rows=chunk,
                                        sets=sets, expect=expect)
                    job = pusher.submit(self.destination.push, batch)
                    in_flight = (job, len(chunk), sets)
                    sets = expect = Ref()
                    if len(chunk) < size:
                        summary.done = True
                        break
                if in_flight is not None:
                    observed = self._settle(*in_flight, summary, cached, observed, progress)
        finally:
            cached.record(self.stream, Ref(content=summary.position, **observed.governance()))
            self.cache.save(cached)
        self.host.emit("export.pushed", rows=summary.rows, batches=summary.batches,
                       governance=bool(summary.carried), done=summary.done)
        return summary

    def _settle(self, job: Future[Ref], rows: int, sets: Ref, summary: ExportSummary,
                cached: CachedRefs, observed: Ref, progress: Progress | None) -> Ref:
        """Wait for one push and account for it; returns the last-contact identities."""
        try:
            result = job.result()
        except Conflict as conflict:
            self.host.emit("export.conflict", component=conflict.component)
            raise
        summary.rows += rows
        summary.batches += 1
        summary.position = max(summary.position, result.content)
        if sets != Ref():
            summary.carried = [c for c in GOVERNANCE if getattr(sets, c)]
            observed = _governance_of(result)
            cached.record(self.stream, observed)
            self.cache.save(cached)  # the governance write is recorded at once
        if progress is not None:
            progress(summary)
        return observed

    def report(self, *, count_limit: int = STATUS_COUNT_ROWS) -> ExportReport:
        """The content and governance axes of ``hostcore status`` for this stream."""
        observed = self.cache.load_observed().ref(self.stream)
        hooked = self.host.hook.hostcore_published_ref(stream=self.stream, host=self.host)
        # A destination whose plugin does not implement the hook is asked directly.
        published = hooked if isinstance(hooked, Ref) else self.destination.published(
            self.stream, self.host.store.instance_id)
        behind, last = pending_rows(self.host, published.content, count_limit=count_limit)
        local = msgspec.structs.replace(local_governance(self.host), content=last)
        return ExportReport(
            destination=self.destination.name,
            stream=self.stream,
            position=published.content,
            rows_behind=behind,
            rows_behind_capped=behind >= count_limit,
            governance=compare(observed, published),
            since_last_push=compare(local, observed),
        )


class ExportReport(msgspec.Struct, kw_only=True):
    """The export's two axes: content as counts, governance as Divergences.

    ``governance`` compares the ref observed at the last contact with the one
    the destination publishes now; ``since_last_push`` compares this host's ref
    with the one observed at the last contact (a moved ``context`` means the
    local policy changed since the last push; rows already forwarded stay).
    """

    destination: str
    stream: str
    position: int
    rows_behind: int
    rows_behind_capped: bool
    governance: Divergence
    since_last_push: Divergence

    def policy_moved(self) -> bool:
        return "context" in self.since_last_push.moved()

    def as_status(self) -> dict[str, Any]:
        """Flat, readable values for ``hostcore status`` (enums and short hashes)."""
        return {
            "destination": self.destination,
            "stream": self.stream,
            "position": self.position,
            "rows_behind": self.rows_behind,
            "rows_behind_capped": self.rows_behind_capped,
            "governance": _render_divergence(self.governance),
            "moved_at_destination": ", ".join(self.governance.moved()) or "none",
            "since_last_push": _render_divergence(self.since_last_push),
            "local_policy": (
                "moved since the last push; rows already forwarded are not retracted"
                if self.policy_moved() else "unchanged since the last push"),
        }


def _render_divergence(divergence: Divergence) -> dict[str, str]:
    rendered = {}
    for diff in divergence.diffs()[1:]:
        text = str(diff.status)
        if diff.status == "moved":
            text += f" {str(diff.local)[:12]}→{str(diff.remote)[:12]}"
        rendered[diff.component] = text
    return rendered


def _governance_of(ref: Ref) -> Ref:
    return Ref(**ref.governance())


def _next_rows(rows: Iterator[tuple[Any, ...]], count: int) -> list[ExportRow]:
    """The next ``count`` rows of a seam read (fewer at its end), as ExportRows.

    This runs once per exported row, so it is one comprehension with the
    unpacking inlined, and no list of the seam's tuples is kept in between: a
    tuple freed as soon as it is unpacked leaves its memory warm for the next.
    """
    return [ExportRow(position, partition, source_id, session_id, ts, directory, git_remote,
                      msgspec.Raw(payload), key)
            for position, partition, source_id, session_id, ts, directory, git_remote, payload,
            key in itertools.islice(rows, count)]
