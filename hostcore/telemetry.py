"""Telemetry: one catalog of events, validated on emit, dispatched to sinks.

Every attribute is a count (a non-negative ``int``), a ``bool`` or an enum value
(one of a fixed tuple of strings). There is no free-text attribute, so an event
cannot carry a repository name, a path or a title. Any declared attribute may be
omitted ("omitted when zero" is a normal shape); an undeclared one is an error.

A sink that raises never breaks the emitter: the failure is counted per sink and
logged once per sink, as one line (the traceback only at debug level).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import msgspec

from hostcore.errors import RegistrationError, TelemetryError

if TYPE_CHECKING:
    from hostcore.plugin.registration import TelemetrySink

log = logging.getLogger("hostcore.telemetry")

AttrType = type[int] | type[bool] | tuple[str, ...]
AttrValue = int | bool | str


class EventSpec(msgspec.Struct, frozen=True):
    """One catalogued event: its name, attribute types and a sentence for the docs.

    ``attributes`` maps each attribute name to ``int`` (a count, never negative),
    ``bool``, or a tuple of the enum values it may take.
    """

    name: str
    attributes: Mapping[str, AttrType]
    description: str = ""


class Event(msgspec.Struct, frozen=True):
    """An emitted event as sinks receive it. ``ts`` is seconds since the epoch."""

    name: str
    ts: float
    attributes: dict[str, AttrValue]


class Catalog:
    """The merged set of :class:`EventSpec` from the host and its plugins."""

    def __init__(self) -> None:
        self._specs: dict[str, EventSpec] = {}
        self._owners: dict[str, str] = {}

    def add(self, spec: EventSpec, owner: str) -> None:
        _check_spec(spec, owner)
        if spec.name in self._specs:
            raise RegistrationError(
                f"event {spec.name!r} from {owner} is already catalogued by "
                f"{self._owners[spec.name]}"
            )
        self._specs[spec.name] = spec
        self._owners[spec.name] = owner

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[EventSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def get(self, name: str) -> EventSpec | None:
        return self._specs.get(name)

    def validate(self, name: str, attributes: Mapping[str, AttrValue]) -> None:
        spec = self._specs.get(name)
        if spec is None:
            raise TelemetryError(f"event {name!r} is not in the telemetry catalog")
        for key, value in attributes.items():
            kind = spec.attributes.get(key)
            if kind is None:
                raise TelemetryError(f"event {name!r} has no attribute {key!r}")
            if not _matches(kind, value):
                raise TelemetryError(
                    f"event {name!r} attribute {key!r}: {value!r} is not {_kind_name(kind)}"
                )


def _matches(kind: AttrType, value: object) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return isinstance(kind, tuple) and isinstance(value, str) and value in kind


def _kind_name(kind: AttrType) -> str:
    if isinstance(kind, tuple):
        return f"one of {', '.join(kind)}"
    return "a bool" if kind is bool else "a non-negative count"


def _check_spec(spec: EventSpec, owner: str) -> None:
    # Names and enum values enter the terms identity (hostcore.export.ref.identity),
    # whose separators are control characters: refuse them here, where plugins hand
    # them over.
    texts = [spec.name, *spec.attributes,
             *(v for kind in spec.attributes.values() if isinstance(kind, tuple) for v in kind)]
    if any(not isinstance(t, str) or not t.isprintable() for t in texts):
        raise RegistrationError(f"event {spec.name!r} from {owner}: names and enum values "
                                "must be printable text")
    for key, kind in spec.attributes.items():
        ok = kind is int or kind is bool or (
            isinstance(kind, tuple) and kind and all(isinstance(v, str) for v in kind)
        )
        if not ok:
            raise RegistrationError(
                f"event {spec.name!r} from {owner}: attribute {key!r} must be int, bool "
                "or a tuple of enum strings (telemetry carries no free text)"
            )


class Telemetry:
    """Validates events against the catalog and hands them to every sink."""

    def __init__(self, catalog: Catalog, sinks: Iterable[TelemetrySink] = ()) -> None:
        self.catalog = catalog
        self._sinks: list[TelemetrySink] = list(sinks)
        self.sink_failures: dict[str, int] = {}

    def add_sink(self, sink: TelemetrySink) -> None:
        self._sinks.append(sink)

    def emit(self, name: str, /, **attributes: AttrValue) -> Event:
        """Validate and dispatch one event; returns it (useful in tests)."""
        self.catalog.validate(name, attributes)
        event = Event(name=name, ts=time.time(), attributes=dict(attributes))
        for sink in self._sinks:
            try:
                sink.receive(event)
            except Exception as exc:
                self._count_failure(sink, exc)
        return event

    def _count_failure(self, sink: object, error: Exception) -> None:
        sink_name = getattr(sink, "name", type(sink).__name__)
        seen = self.sink_failures.get(sink_name, 0)
        self.sink_failures[sink_name] = seen + 1
        if seen == 0:
            # Once per sink: a broken sink must not flood the log it may be part of.
            # One line by kind (its message may hold a path the sink writes to); the
            # traceback is for -vv.
            log.warning("telemetry sink %r raised %s; further failures are only counted",
                        sink_name, type(error).__name__)
            log.debug("traceback of the failure of telemetry sink %r", sink_name,
                      exc_info=error)

    def close(self) -> None:
        for sink in self._sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as exc:
                    self._count_failure(sink, exc)
