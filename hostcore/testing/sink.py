"""The conformance suite for telemetry sinks (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hostcore.plugin.registration import KINDS, validate
from hostcore.telemetry import Event, EventSpec
from hostcore.testing.kit import (
    LARGE_COUNT,
    RECEIVE_BUDGET_SECONDS,
    _PluginSuite,
    _ProbeEvents,
    contract_failure,
    registered_objects,
    require,
)


def sample_events(spec: EventSpec) -> Iterator[Event]:
    """Events covering ``spec``: typical, extreme, every enum value, and bare."""
    def values(pick: Callable[[Any], Any]) -> dict[str, Any]:
        return {key: pick(kind) for key, kind in spec.attributes.items()}

    now = time.time()
    yield Event(spec.name, now, values(lambda k: 3 if k is int else True if k is bool else k[0]))
    yield Event(spec.name, now, values(
        lambda k: LARGE_COUNT if k is int else False if k is bool else k[-1]))
    yield Event(spec.name, now, values(lambda k: 0 if k is int else False if k is bool else k[0]))
    enums = {key: kind for key, kind in spec.attributes.items() if isinstance(kind, tuple)}
    for key, kind in enums.items():
        for value in kind:
            yield Event(spec.name, now, {key: value})
    yield Event(spec.name, now, {})


class TelemetrySinkConformance(_PluginSuite):
    """Checks every telemetry sink the plugin registers.

    Contract: ``receive(event)`` accepts every catalogued event — every attribute
    type, extreme counts, any subset of attributes — without raising, without
    changing the event, and quickly (it runs inside the emitting step); ``close()``,
    if defined, works after events were received.
    """

    receive_budget_seconds = RECEIVE_BUDGET_SECONDS

    @pytest.fixture
    def event_plugins(self) -> tuple[object, ...]:
        """Plugins whose catalogued events the sink must also survive."""
        return ()

    @pytest.fixture
    def sink_host(self, build_host: Callable[..., Any],
                  event_plugins: tuple[object, ...]) -> Any:
        return build_host(_ProbeEvents(), *event_plugins)

    @pytest.fixture
    def sinks(self, sink_host: Any, plugin: object) -> list[Any]:
        return registered_objects(sink_host, plugin, "telemetry_sink")

    def _events(self, host: Any) -> list[Event]:
        return [event for spec in host.catalog for event in sample_events(spec)]

    def test_sink_is_a_valid_registration(self, sinks: list[Any]) -> None:
        for sink in sinks:
            try:
                validate(KINDS["telemetry_sink"], sink, "the sink")
            except Exception as exc:
                contract_failure(str(exc))

    def test_sink_survives_every_catalogued_event(self, sink_host: Any,
                                                  sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            for event in events:
                try:
                    sink.receive(event)
                except Exception as exc:
                    contract_failure(
                        f"sink {sink.name!r} raised on event {event.name!r} with attributes "
                        f"{event.attributes}. A sink must accept every catalogued event, any "
                        "declared attribute may be omitted; the host would count the failure "
                        "and the event would be lost for this sink.", raised=exc)

    def test_sink_leaves_events_unchanged(self, sink_host: Any, sinks: list[Any]) -> None:
        for sink in sinks:
            for event in self._events(sink_host):
                before = dict(event.attributes)
                sink.receive(event)
                require(event.attributes == before,
                        f"sink {sink.name!r} changed the attributes of event {event.name!r} "
                        f"from {before} to {event.attributes}; every sink receives the same "
                        "event object, so copy before you modify.")

    def test_sink_receives_quickly(self, sink_host: Any, sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            started = time.perf_counter()
            for event in events:
                sink.receive(event)
            mean = (time.perf_counter() - started) / len(events)
            require(mean <= self.receive_budget_seconds,
                    f"sink {sink.name!r} took {mean * 1000:.1f} ms per event on average "
                    f"(budget {self.receive_budget_seconds * 1000:.0f} ms): receive() runs "
                    "inside the step that emitted, so buffer and send in the background.")

    def test_sink_closes_after_receiving(self, sink_host: Any, sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            for event in events:
                sink.receive(event)
            close = getattr(sink, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception as exc:
                contract_failure(f"sink {sink.name!r}: close() raised after receiving "
                                 "events; the host calls it once when it closes.", raised=exc)

    def test_sink_survives_events_emitted_through_a_host(self, sink_host: Any,
                                                         sinks: list[Any]) -> None:
        for event in self._events(sink_host):
            sink_host.emit(event.name, **event.attributes)
        failures = {name: count for name, count in sink_host.telemetry.sink_failures.items()
                    if name in {s.name for s in sinks}}
        require(not failures, f"sinks raised while the host dispatched events: {failures}")
