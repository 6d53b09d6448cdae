"""The registration objects plugins return from hostcore's registration hooks.

Each kind is a :class:`typing.Protocol`: a plugin returns any object with the
named attributes; there is nothing to subclass. The host validates every object
when plugins load (see :data:`KINDS`), so a plugin's mistake is reported with the
plugin's name at load time rather than deep inside a tick.

Every registration object has a ``name``: lowercase letters, digits, ``.``,
``_`` and ``-``, unique within its kind across all plugins. Any of them may also
define ``availability() -> str | None`` (``None`` when usable, else a sentence
saying why not) and ``status() -> Mapping[str, object]`` (counts for
``hostcore status``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from hostcore.errors import RegistrationError

if TYPE_CHECKING:
    from hostcore.evidence.rows import SourceBatch
    from hostcore.export.batch import ExportBatch
    from hostcore.export.ref import Ref
    from hostcore.host import Host
    from hostcore.telemetry import Event
    from hostcore.workitems.items import Closure, Listing, WorkItemRef


class WorkerResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker reports after one run.

    ``pending`` is true while the worker has more work it could do right now; the
    tick loop then shortens its next wait (the backlog cadence). ``counts`` are
    shown by ``hostcore status`` and must be counts, never names.
    """

    pending: bool = False
    counts: dict[str, int] = msgspec.field(default_factory=dict)


class StepFailed(Exception):
    """Raise from ``Worker.run`` as ``raise StepFailed(counts) from error`` when the
    step failed after doing part of its work (rows stored before the disk filled,
    say): the tick reports the failure as ``error``'s kind and message, with
    ``counts``, what the step did, as a :class:`WorkerResult`'s counts would be."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        super().__init__("the step failed after part of its work (see the cause)")
        self.counts = dict(counts)


@runtime_checkable
class Source(Protocol):
    """Evidence since a cursor. See ``hostcore_sources`` for the contract."""

    name: str

    def read(self, cursor: str | None) -> SourceBatch: ...


@runtime_checkable
class Provider(Protocol):
    """Work items (issues, pull requests) of one tracker. See ``hostcore_providers``.

    ``closure`` raises :class:`~hostcore.workitems.items.ProviderError` when it
    cannot answer, and nothing else.
    """

    name: str

    def owns(self, ref: WorkItemRef) -> bool: ...

    def scope_of(self, ref: WorkItemRef) -> str: ...

    def list_items(self) -> Listing: ...

    def closure(self, ref: WorkItemRef) -> Closure: ...


@runtime_checkable
class PolicyInput(Protocol):
    """One input to the withholding policy. See ``hostcore_policy_inputs``."""

    name: str

    def withholds(self, directory: str, source_id: str) -> bool: ...

    def fingerprint_part(self) -> str | None: ...


@runtime_checkable
class TelemetrySink(Protocol):
    """Receives every catalogued event. See ``hostcore_telemetry_sinks``."""

    name: str

    def receive(self, event: Event) -> None: ...


@runtime_checkable
class Worker(Protocol):
    """A step run once per tick. See ``hostcore_workers``."""

    name: str

    def run(self, host: Host) -> WorkerResult: ...


@runtime_checkable
class Destination(Protocol):
    """Where the export stream is pushed. See ``hostcore_destinations``.

    ``push(batch)`` takes an :class:`~hostcore.export.batch.ExportBatch`. Under
    its own lock, before writing anything, it checks
    :func:`~hostcore.export.batch.check_continuity` (raising
    :class:`~hostcore.export.batch.DestinationChanged`) and applies the batch's
    governance change through :func:`~hostcore.export.batch.apply_governance`
    (raising :class:`~hostcore.export.ref.Conflict`); then it appends the rows
    past its position for the batch's origin (dropping any at or below it, so a
    rerun never duplicates), makes them durable, and returns the
    :class:`~hostcore.export.ref.Ref` it now publishes for that origin. The
    exporter calls ``push`` from one worker thread, one call at a time, while it
    reads the next batch.

    ``published(stream, origin)`` returns that ref without writing: ``content``
    is the last position durably held from the store ``origin`` (``0`` when
    none), the identities are the ones published for ``(stream, origin)``:
    governance is kept per origin, so hosts sharing a destination never write
    over each other's. The export resumes from that position, so it must be the
    durable truth.

    ``instance()`` (optional) returns an id created with the destination's
    storage and never reused: a destination deleted and re-created, or replaced,
    answers a new one. The exporter puts it in every batch it pushes.

    An optional ``key`` string says where the destination writes (for a
    directory destination, its path); the ref cache is keyed by it, so
    re-pointing a destination discards what was cached for the old place.
    """

    name: str

    def push(self, batch: ExportBatch) -> Ref: ...

    def published(self, stream: str, origin: str) -> Ref: ...


Registered = Source | Provider | PolicyInput | TelemetrySink | Worker | Destination


class Kind(msgspec.Struct, frozen=True):
    """A registration kind: the hook that returns it and what each object must have."""

    key: str
    hook: str
    protocol: type
    required: tuple[str, ...]


KINDS: dict[str, Kind] = {
    k.key: k
    for k in (
        Kind("source", "hostcore_sources", Source, ("read",)),
        Kind("provider", "hostcore_providers", Provider,
             ("owns", "scope_of", "list_items", "closure")),
        Kind("policy_input", "hostcore_policy_inputs", PolicyInput,
             ("withholds", "fingerprint_part")),
        Kind("telemetry_sink", "hostcore_telemetry_sinks", TelemetrySink, ("receive",)),
        Kind("worker", "hostcore_workers", Worker, ("run",)),
        Kind("destination", "hostcore_destinations", Destination, ("push", "published")),
    )
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def availability(obj: object) -> str | None:
    """``None`` when ``obj`` is usable, else why not (its optional ``availability()``).

    A check that raises counts as unavailable: a broken check must not make a
    component look usable.
    """
    check = getattr(obj, "availability", None)
    if not callable(check):
        return None
    try:
        reason = check()
    except Exception as exc:
        return f"availability check raised {type(exc).__name__}"
    return None if reason is None else str(reason)


def as_objects(result: object) -> list[object]:
    """A hook may return one object, an iterable of them, or ``None``."""
    if result is None:
        return []
    if isinstance(result, Iterable) and not isinstance(result, (str, bytes, Mapping)):
        return list(result)
    return [result]


def validate(kind: Kind, obj: object, owner: str) -> None:
    """Raise :class:`RegistrationError` naming ``owner`` if ``obj`` is not a valid ``kind``."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        raise RegistrationError(
            f"{owner}: {kind.hook} returned {type(obj).__name__} whose name {name!r} is not "
            "a short lowercase identifier"
        )
    missing = [attr for attr in kind.required if not callable(getattr(obj, attr, None))]
    if missing:
        raise RegistrationError(
            f"{owner}: {kind.key} {name!r} lacks required method(s) {', '.join(missing)}"
        )
