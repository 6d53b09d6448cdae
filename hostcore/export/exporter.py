"""Export: push the rows the export seam permits to a destination, resumably.

The export stream is the store's feed as the seam shows it: every row the live
withholding policy permits, in position order. A push hands a destination one
:class:`ExportBatch`; the destination appends the rows it does not already hold
(positions at or below its own are dropped) and returns the :class:`Ref` it now
publishes. The destination's durable position is the truth: every run starts
from ``destination.published(stream, origin).content``, so a run killed at any
point is resumed by running again, and it re-reads from the seam at most the
two batches that were not yet durable (one being pushed, one being read).

Every batch names the destination instance and the position the run resumed
from (:func:`~hostcore.export.batch.check_continuity`). A destination deleted,
re-created or restored from a backup while a run pushes refuses the next batch
with :class:`~hostcore.export.batch.DestinationChanged`; the run then reads the
destination's own position and instance again, drops what its ref cache recorded
about the old instance, republishes governance, and resumes from there (as a
client relists after a stale resourceVersion), at most :data:`MAX_RESUMES` times.

The host's own ref for the stream (:func:`local_ref`):

* ``content``: the export feed position, the position of the last row the seam
  permits;
* ``context``: ``host.seam.export_policy_fingerprint()``;
* ``terms``: the identity of the event catalog and the record schemas in force;
* ``decisions``: a fold over the ledger records that carry a decision (a
  ``control``, ``session`` or ``ended`` section); poll-only records are left out.

Governance is pushed on its own, in a batch without rows, before the content of
each run, and decided per component by :func:`plan_governance` from this host's
value, the value its last agreement with the destination established (the ref
cache) and the value the destination publishes now. A conflict holds back that
component's write only: content keeps flowing (the seam already applies this
host's policy), the conflict is recorded, announced once
(``export.conflict``), shown by ``status`` and in the run's summary, and not
written again until one side changes or someone adopts the destination's value.
Rows already forwarded are never retracted when the policy changes.

A run that fails (the destination raised) is followed by a back-off, kept in
``<root>/cache/export-backoff.json`` so that ``hostcore export`` from cron, a new
process each time, honours it as the worker does: until the time it names, a
run raises :class:`ExportDeferred` and contacts nothing. The delay after ``n``
failures in a row is drawn uniformly from ``[w/2, w]``, ``w = min(cap, base *
2**(n-1))`` (tenacity's exponential waits, half fixed and half random), so
machines that failed together, at a server restart, come back spread over the
window instead of on one tick, and none sooner than half of it. The first run
that succeeds removes the file.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hostcore.errors import HostcoreError
from hostcore.export.batch import EXPORT_COLUMNS, DestinationChanged, ExportBatch, ExportRow
from hostcore.export.destinations import (
    ExportSettings,
    destination_instance,
    destination_key,
)
from hostcore.export.ref import (
    ABSENT,
    DEFAULT_STREAM,
    GOVERNANCE,
    ComponentConflict,
    Conflict,
    Divergence,
    Ref,
    compare,
    fold,
    identity,
)
from hostcore.export.refcache import CachedRefs, RefCache
from hostcore.files import atomic_write
from hostcore.plugin.calls import first_result
from hostcore.records import encode_json
from hostcore.timestamps import format_utc, parse, utc_now

if TYPE_CHECKING:
    from hostcore.host import Host

# Rows per push. Each push ends in a durable write (an fsync); larger batches
# measured no faster but hold more memory. A kill costs at most two batches of
# seam re-reads (one pushing, one being read), a few MB: under one segment.
BATCH_ROWS = 10_000
# Rows ``status`` counts through the seam before it reports "at least" this many.
STATUS_COUNT_ROWS = 100_000
# How many times one run follows a destination that changed under it before it
# gives up (raises DestinationChanged): a destination replaced again and again
# is something for a person to look at, not a loop.
MAX_RESUMES = 3
# The fewest characters an ``--adopt`` prefix may have (unless it is the whole
# value): enough that a value moved meanwhile is never taken for the one seen.
ADOPT_PREFIX_CHARS = 7
# Where the back-off after failed runs is kept, under the state root.
BACKOFF_PATH = Path("cache") / "export-backoff.json"
# A failure's message kept for status is cut to this many characters.
BACKOFF_ERROR_CHARS = 300

log = logging.getLogger("hostcore.export.exporter")

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
    # Defers the ledger modules until a ref is computed: importing the engine skips them.
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


# -- governance ----------------------------------------------------------------------


class AdoptRefused(HostcoreError):
    """``--adopt COMPONENT=PREFIX`` named a value the destination no longer holds.

    Like git's ``--force-with-lease``: the adoption replaces exactly the value
    the operator saw, and refuses (writing nothing) if it moved since.
    """


class GovernancePlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one contact does with governance (:func:`plan_governance`).

    ``sets``/``expect``: the write to push (empty: none); ``agreed``: the
    identities the destination already holds with this host's value (agreed
    without a write); ``conflicts``: components held back.
    """

    sets: Ref = Ref()
    expect: Ref = Ref()
    agreed: Ref = Ref()
    conflicts: tuple[ComponentConflict, ...] = ()


def plan_governance(local: Ref, agreed: Ref, published: Ref,
                    adopt: Mapping[str, str] | None = None) -> GovernancePlan:
    """Decide, per component, what a contact writes.

    ``local`` is this host's value, ``agreed`` the value its last agreement with
    the destination established (empty: none on record, e.g. the cache was
    deleted), ``published`` what the destination holds now. For each component:

    * the destination holds this host's value: agreed, nothing to write;
    * it holds nothing: write, create-only (expect :data:`~hostcore.export.ref.ABSENT`);
    * it holds the agreed value: write, expecting that value;
    * it moved and this host's value did not: nothing to write (``status``
      shows the destination moved);
    * both moved (or nothing is on record and it holds another value): a
      conflict, held back; never an overwrite.

    ``adopt`` maps a component to a prefix of the value the destination holds:
    write over exactly that value. :class:`AdoptRefused` if it holds another.
    """
    sets: dict[str, str] = {}
    expect: dict[str, str] = {}
    now: dict[str, str] = {}
    conflicts: list[ComponentConflict] = []
    for component in GOVERNANCE:
        mine, last, theirs = (getattr(ref, component) for ref in (local, agreed, published))
        lease = (adopt or {}).get(component)
        if lease is not None:
            _check_lease(component, lease, theirs)
        if not mine:
            continue
        if mine == theirs:
            now[component] = theirs
        elif lease is not None:
            sets[component], expect[component] = mine, theirs
        elif not theirs:
            sets[component], expect[component] = mine, ABSENT
        elif theirs == last:
            sets[component], expect[component] = mine, last
        elif mine != last:
            conflicts.append(ComponentConflict(component=component, expected=last,
                                               found=theirs, attempted=mine))
    return GovernancePlan(sets=_identities(sets), expect=_identities(expect),
                          agreed=_identities(now), conflicts=tuple(conflicts))


def _identities(values: Mapping[str, str]) -> Ref:
    return msgspec.structs.replace(Ref(), **values)


def _check_lease(component: str, prefix: str, held: str) -> None:
    if held and held.startswith(prefix) and (len(prefix) >= ADOPT_PREFIX_CHARS
                                             or prefix == held):
        return
    if held and held.startswith(prefix):
        raise AdoptRefused(f"--adopt {component}={prefix}: name at least {ADOPT_PREFIX_CHARS} "
                           f"characters of the value to replace ({held[:12]}…)")
    now = f"holds {held[:12]}…" if held else "holds none"
    raise AdoptRefused(f"--adopt {component}={prefix}: the destination's {component} now {now}, "
                       "not the value you named: it moved since you looked. Nothing was "
                       "adopted; `hostcore status` shows what it holds now.")


# -- back-off after a failed run ------------------------------------------------------


class ExportDeferred(HostcoreError):
    """A run inside the back-off that follows failed runs: nothing was contacted.

    ``retry_at`` is when the next run may contact the destination.
    """

    def __init__(self, backoff: Backoff) -> None:
        self.retry_at = backoff.retry_at
        super().__init__(
            f"export deferred: {backoff.failures} run(s) in a row failed, the last at "
            f"{backoff.failed_at}; the next may contact the destination at "
            f"{backoff.retry_at} (back-off with jitter: [plugins.export] backoff_seconds "
            "and backoff_max_seconds)")


class Backoff(msgspec.Struct, kw_only=True):
    """``cache/export-backoff.json``: runs against ``destination`` (its key) failed
    ``failures`` times in a row, the last at ``failed_at`` with ``error``; no run
    contacts it before ``retry_at``."""

    destination: str
    failures: int
    failed_at: str
    retry_at: str
    error: str = ""

    def due(self, now: datetime, cap: float) -> bool:
        """Whether a run may contact the destination at ``now``. A stamp that does not
        parse, or further ahead than the longest back-off ``cap`` (the clock was set
        back since), reads as due: a wrong file never stops the export for long."""
        at = parse(self.retry_at)
        return at is None or at <= now or at > now + timedelta(seconds=cap)

    def render(self) -> str:
        """One line for ``hostcore status``."""
        return (f"{self.failures} run(s) in a row failed, the last at {self.failed_at} "
                f"({self.error}); next attempt at {self.retry_at}")


def backoff_delay(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after ``failures`` failed runs in a row: uniform in ``[w/2, w]``,
    ``w = min(cap, base * 2**(failures-1))``. ("Equal jitter": spread as widely as
    full jitter's ``[0, w]`` would not matter for a fleet, a floor does, so a host
    never retries a failing server on its very next tick.)"""
    # Here, not at the top: only a failed run pays tenacity's import (benchmarks/startup.py).
    import tenacity

    # tenacity's wait functions read only the attempt number of the state they are given.
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.attempt_number = max(1, failures)
    half = (tenacity.wait_exponential(multiplier=base / 2, max=cap / 2)
            + tenacity.wait_random_exponential(multiplier=base / 2, max=cap / 2))
    return float(half(state))


class BackoffFile:
    """Reads and writes ``<root>/cache/export-backoff.json``.

    Losing it costs one early retry, never a wrong answer, so it is written without
    fsync and a file that does not decode reads as no back-off.
    """

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / BACKOFF_PATH

    def load(self, destination: str) -> Backoff | None:
        """The back-off standing for ``destination``; None when there is none."""
        try:
            backoff = msgspec.json.decode(self.path.read_bytes(), type=Backoff)
        except (OSError, msgspec.DecodeError, UnicodeDecodeError):
            return None
        return backoff if backoff.destination == destination else None

    def failed(self, destination: str, error: BaseException, now: datetime, *,
               base: float, cap: float) -> Backoff:
        """Record one more failed run at ``now``; the back-off now standing."""
        previous = self.load(destination)
        failures = (previous.failures if previous is not None else 0) + 1
        delay = timedelta(seconds=backoff_delay(failures, base, cap))
        backoff = Backoff(destination=destination, failures=failures,
                          failed_at=format_utc(now, "micro"),
                          retry_at=format_utc(now + delay, "micro"),
                          error=(str(error) or type(error).__name__)[:BACKOFF_ERROR_CHARS])
        try:
            atomic_write(self.path, encode_json(backoff), durable=False)
        except OSError as exc:
            # The failure being recorded is what the caller reports; this costs an early retry.
            log.warning("the export back-off could not be written (%s)", type(exc).__name__)
        return backoff

    def clear(self) -> None:
        """A run succeeded: no back-off stands."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


# -- the engine --------------------------------------------------------------------


class ExportSummary(msgspec.Struct, kw_only=True):
    """What one export run did.

    ``done`` is true when the run reached the end of the feed; ``carried`` names
    the governance components this run set at the destination; ``conflicts``
    the components held back (this host's value and the destination's differ
    and neither is the one last agreed); ``resumed`` how many times the
    destination changed under the run and it resumed from the destination's
    own position; ``cache_saved`` is false when the ref cache could not be
    written (the next run negotiates again).
    """

    destination: str
    stream: str
    rows: int = 0
    batches: int = 0
    position: int = 0
    carried: list[str] = msgspec.field(default_factory=list)
    done: bool = False
    positions_dropped: bool = False
    conflicts: list[ComponentConflict] = msgspec.field(default_factory=list)
    resumed: int = 0
    cache_saved: bool = True

    def conflict(self) -> Conflict | None:
        """The conflicts standing after this run as one :class:`Conflict`, if any."""
        if not self.conflicts:
            return None
        return Conflict.of(self.conflicts, stream=self.stream, destination=self.destination)


Progress = Callable[[ExportSummary], None]


@dataclass
class _Contact:
    """What the destination said when the run (re)started: its instance and ref."""

    instance: str
    published: Ref


class Exporter:
    """Pushes one stream of the host's export to one destination.

    :param batch_rows: rows per push (default: ``[plugins.export] batch_rows``, else
        :data:`BATCH_ROWS`).
    :param max_resumes: how often one run follows a changed destination
        (default :data:`MAX_RESUMES`).
    :param clock: the current time, for the back-off.

    ``run()`` and ``report()`` may be called from any thread (one run at a time
    per host: the CLI and the worker hold the step lock).
    """

    def __init__(self, host: Host, destination: Any, *, stream: str = DEFAULT_STREAM,
                 batch_rows: int | None = None, max_resumes: int = MAX_RESUMES,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = host.plugin_config("export", ExportSettings)
        batch_rows = batch_rows or self.settings.batch_rows or BATCH_ROWS
        if batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        self.host = host
        self.destination = destination
        self.stream = stream
        self.batch_rows = batch_rows
        self.max_resumes = max_resumes
        self.clock = clock
        self.cache = RefCache(host.root)
        self.backoff = BackoffFile(host.root)

    def run(self, *, max_rows: int | None = None, adopt: Mapping[str, str] | None = None,
            progress: Progress | None = None) -> ExportSummary:
        """Publish this host's governance, then push rows from the destination's
        position until the feed ends or ``max_rows`` were pushed.

        A governance conflict does not raise: it is held back, announced once and
        listed in the summary's ``conflicts`` while content flows. ``adopt`` maps
        a component to a prefix (at least :data:`ADOPT_PREFIX_CHARS` characters)
        of the value the destination holds: this host's value is written over
        exactly that one, or :class:`AdoptRefused` is raised before anything is
        pushed if the destination holds another. Raises
        :class:`~hostcore.export.batch.DestinationChanged` when the destination
        changed under the run more than ``max_resumes`` times, and
        :class:`ExportDeferred`, contacting nothing, inside the back-off after a
        failed run (see the module docstring).
        """
        key = destination_key(self.destination)
        standing = self.backoff.load(key)
        if standing is not None and not standing.due(self.clock(),
                                                     self.settings.backoff_max_seconds):
            raise ExportDeferred(standing)
        try:
            summary = self._run(max_rows, adopt, progress)
        except AdoptRefused:
            raise  # the operator named a stale value: the destination did nothing wrong
        except Exception as exc:
            self.backoff.failed(key, exc, self.clock(), base=self.settings.backoff_seconds,
                                cap=self.settings.backoff_max_seconds)
            raise
        if standing is not None:
            self.backoff.clear()
        return summary

    def _run(self, max_rows: int | None, adopt: Mapping[str, str] | None,
             progress: Progress | None) -> ExportSummary:
        origin = self.host.store.instance_id
        summary = ExportSummary(destination=self.destination.name, stream=self.stream)
        cached = self.cache.load(destination_key(self.destination))
        summary.positions_dropped = cached.bind_store(origin)
        local = local_governance(self.host)
        lease = dict(adopt or {})
        try:
            for attempt in itertools.count():
                contact = self._contact(cached, origin)
                summary.position = contact.published.content
                try:
                    self._govern(contact, origin, cached, local, lease, summary)
                    lease = {}  # adopted: a resume asks the destination afresh
                    self._push_rows(contact, origin, cached, summary, max_rows, progress)
                    break
                except DestinationChanged:
                    if attempt >= self.max_resumes:
                        raise
                    summary.resumed += 1
        finally:
            agreed = cached.ref(self.stream)
            cached.record(self.stream, msgspec.structs.replace(agreed, content=summary.position))
            self._save(cached, summary)
        self.host.emit("export.pushed", rows=summary.rows, batches=summary.batches,
                       governance=bool(summary.carried), done=summary.done,
                       conflicts=len(summary.conflicts), resumed=summary.resumed)
        return summary

    def _contact(self, cached: CachedRefs, origin: str) -> _Contact:
        """Ask the destination who it is and what it holds; bind the cache to it."""
        with _naming_where(self.destination):
            instance = destination_instance(self.destination)
            published = self.destination.published(self.stream, origin)
        cached.bind_instance(instance)
        cached.observe(self.stream, published)
        return _Contact(instance, published)

    def _govern(self, contact: _Contact, origin: str, cached: CachedRefs, local: Ref,
                lease: Mapping[str, str], summary: ExportSummary) -> None:
        """Push this host's governance changes, alone, and record what stands."""
        plan = plan_governance(local, cached.ref(self.stream), contact.published, lease)
        agreed = _merged(cached.ref(self.stream), plan.agreed)
        conflicts = list(plan.conflicts)
        sets, expect = plan.sets, plan.expect
        while sets != Ref():
            batch = ExportBatch(stream=self.stream, origin=origin, rows=[], sets=sets,
                                expect=expect, destination=contact.instance,
                                after=contact.published.content)
            try:
                with _naming_where(self.destination):
                    result = self.destination.push(batch)
            except Conflict as refused:
                # Another writer moved it between our read and the write: hold
                # those components back and still write the others.
                held = _held_back(refused, sets)
                conflicts += held
                sets, expect = _without(sets, held), _without(expect, held)
                continue
            summary.batches += 1
            self._learn_instance(contact, cached)
            written = [c for c in GOVERNANCE if getattr(sets, c)]
            summary.carried = [c for c in GOVERNANCE if c in written or c in summary.carried]
            agreed = _merged(agreed, Ref(**{c: getattr(result, c) for c in written}))
            cached.observe(self.stream, result)
            sets = Ref()
        cached.record(self.stream, agreed)
        for conflict in cached.record_conflicts(self.stream, conflicts):
            self.host.emit("export.conflict", component=conflict.component)
        summary.conflicts = conflicts
        self._save(cached, summary)  # a governance write is recorded at once

    def _push_rows(self, contact: _Contact, origin: str, cached: CachedRefs,
                   summary: ExportSummary, max_rows: int | None,
                   progress: Progress | None) -> None:
        """Push rows past the destination's position, one push in flight at a time."""
        remaining = float("inf") if max_rows is None else max_rows - summary.rows
        rows = self.host.seam.read_rows_since_sync(None, summary.position, EXPORT_COLUMNS)
        read = 0
        # One push in flight while the next batch is read and built: the
        # destination's encoding, writes and fsyncs overlap the seam's reads. Rows
        # are built on this thread, so the pusher holds the GIL only to encode.
        in_flight: tuple[Future[Ref], int] | None = None
        with contextlib.closing(rows), ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="hostcore-export") as pusher:
            while True:
                size = int(min(self.batch_rows, remaining - read))
                chunk = _next_rows(rows, size) if size > 0 else []
                read += len(chunk)
                if in_flight is not None:
                    self._settle(*in_flight, cached, summary, progress)
                    self._learn_instance(contact, cached)
                    in_flight = None
                if not chunk:
                    summary.done = size > 0
                    break
                batch = ExportBatch(stream=self.stream, origin=origin, rows=chunk,
                                    destination=contact.instance, after=summary.position)
                in_flight = (pusher.submit(self.destination.push, batch), len(chunk))
                if len(chunk) < size:
                    summary.done = True
                    break
            if in_flight is not None:
                self._settle(*in_flight, cached, summary, progress)
                self._learn_instance(contact, cached)

    def _settle(self, job: Future[Ref], rows: int, cached: CachedRefs,
                summary: ExportSummary, progress: Progress | None) -> None:
        """Wait for one push and account for it."""
        with _naming_where(self.destination):
            result = job.result()
        summary.rows += rows
        summary.batches += 1
        summary.position = max(summary.position, result.content)
        cached.observe(self.stream, result)
        if progress is not None:
            progress(summary)

    def _learn_instance(self, contact: _Contact, cached: CachedRefs) -> None:
        """After a push into a destination that had no instance id yet (the push
        created its storage), take the id it was given, so the next batches and the
        cache name it."""
        if not contact.instance:
            contact.instance = cached.instance = destination_instance(self.destination)

    def _save(self, cached: CachedRefs, summary: ExportSummary) -> None:
        if not self.cache.save(cached):
            summary.cache_saved = False

    def report(self, *, count_limit: int = STATUS_COUNT_ROWS) -> ExportReport:
        """The content and governance axes of ``hostcore status`` for this stream.

        Everything about the destination is asked of it now (through
        ``hostcore_published_ref`` for this destination, else ``published()``):
        the position and ``rows_behind`` never come from the cache. The cache
        says only what this host last agreed with this same destination
        instance; a cache about another one (or none) claims nothing. A back-off
        standing after failed runs is part of the report, and of the error when
        the destination cannot be asked either.
        """
        standing = self.backoff.load(destination_key(self.destination))
        try:
            report = self._report(count_limit)
        except HostcoreError as exc:
            if standing is None:
                raise
            raise HostcoreError(f"{exc}; export back-off: {standing.render()}") from exc
        if standing is not None:
            report.backoff, report.next_attempt_at = standing.render(), standing.retry_at
        return report

    def _report(self, count_limit: int) -> ExportReport:
        origin = self.host.store.instance_id
        observed = self.cache.load_observed()
        agreed = Ref()
        if (observed.destination == destination_key(self.destination)
                and observed.instance == destination_instance(self.destination)):
            agreed = observed.ref(self.stream)
            if observed.store != origin:
                agreed = msgspec.structs.replace(agreed, content=0)
        # Asked one plugin at a time: one that raises is reported and failed, not fatal.
        hooked = first_result(self.host.plugins, "hostcore_published_ref", stream=self.stream,
                              host=self.host, destination=self.destination)
        # A destination whose plugin does not implement the hook is asked directly.
        published = hooked if isinstance(hooked, Ref) else self.destination.published(
            self.stream, origin)
        behind, last = pending_rows(self.host, published.content, count_limit=count_limit)
        local = msgspec.structs.replace(local_governance(self.host), content=last)
        return ExportReport(
            destination=self.destination.name,
            stream=self.stream,
            position=published.content,
            rows_behind=behind,
            rows_behind_capped=behind >= count_limit,
            governance=compare(agreed, published),
            since_last_push=compare(local, agreed),
            conflicts=list(plan_governance(local, agreed, published).conflicts),
            ref_cache=self.cache.problem(),
        )


@contextlib.contextmanager
def _naming_where(destination: Any) -> Iterator[None]:
    """An ``OSError`` the destination raises naming no file (a full disk under a write
    to a file it holds open) raised again naming where it writes (its ``key``), so
    the one line the CLI prints says which disk is full."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc),
                      f"export to {destination_key(destination)}") from exc


def _merged(base: Ref, update: Ref) -> Ref:
    """``base`` with every identity ``update`` claims."""
    changes = {c: v for c, v in update.governance().items() if v}
    return msgspec.structs.replace(base, **changes) if changes else base


def _held_back(refused: Conflict, sets: Ref) -> list[ComponentConflict]:
    """The components of ``sets`` a destination's Conflict holds back, with the
    value this host tried to write. A Conflict naming none of them holds back all."""
    named = {c.component: c for c in refused.conflicts if getattr(sets, c.component)}
    if not named:
        return [ComponentConflict(component=c, expected="", found="",
                                  attempted=getattr(sets, c))
                for c in GOVERNANCE if getattr(sets, c)]
    return [msgspec.structs.replace(c, attempted=c.attempted or getattr(sets, c.component))
            for c in named.values()]


def _without(ref: Ref, held: list[ComponentConflict]) -> Ref:
    return msgspec.structs.replace(ref, **{c.component: "" for c in held})


class ExportReport(msgspec.Struct, kw_only=True):
    """The export's two axes: content as counts, governance as Divergences.

    ``governance`` compares the ref this host last agreed with the destination
    with the one it publishes now; ``since_last_push`` compares this host's ref
    with the one last agreed (a moved ``context`` means the local policy changed
    since the last push; rows already forwarded stay); ``conflicts`` lists the
    components whose write is held back; ``ref_cache`` says why the ref cache
    cannot be kept, when it cannot; ``backoff`` the back-off standing after
    failed runs, if one does, and ``next_attempt_at`` when it lets a run contact
    the destination again.
    """

    destination: str
    stream: str
    position: int
    rows_behind: int
    rows_behind_capped: bool
    governance: Divergence
    since_last_push: Divergence
    conflicts: list[ComponentConflict] = msgspec.field(default_factory=list)
    ref_cache: str | None = None
    backoff: str | None = None
    next_attempt_at: str | None = None

    def policy_moved(self) -> bool:
        return "context" in self.since_last_push.moved()

    def as_status(self) -> dict[str, Any]:
        """Flat, readable values for ``hostcore status`` (enums and short hashes); a
        standing back-off first, so the one line the screen gives a component says it."""
        status: dict[str, Any] = {}
        if self.next_attempt_at is not None:
            status["next_attempt_at"] = self.next_attempt_at
        if self.backoff is not None:
            status["backoff"] = self.backoff
        status |= {
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
            "conflicts": _render_conflicts(self.conflicts),
        }
        if self.ref_cache is not None:
            status["ref_cache"] = f"not kept: {self.ref_cache}"
        return status


def _render_conflicts(conflicts: list[ComponentConflict]) -> str:
    if not conflicts:
        return "none"
    return "; ".join(f"{c.component}: this host's {c.attempted[:12]} held back, the "
                     f"destination holds {c.found[:12]}" for c in conflicts)


def adopt_hint(conflicts: list[ComponentConflict]) -> str:
    """The ``--adopt`` arguments that would replace exactly the values found."""
    return " ".join(f"--adopt {c.component}={c.found[:12]}" for c in conflicts if c.found)


def _render_divergence(divergence: Divergence) -> dict[str, str]:
    rendered = {}
    for diff in divergence.diffs()[1:]:
        text = str(diff.status)
        if diff.status == "moved":
            text += f" {str(diff.local)[:12]}→{str(diff.remote)[:12]}"
        rendered[diff.component] = text
    return rendered


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
