"""The OTLP sink: each catalogued event becomes one log record and counter increments.

* **Log record** — body and ``event_name`` are the event's name, the attributes are
  the event's attributes unchanged, the timestamp is the event's.
* **Counters** — ``hostcore.events`` counts occurrences, with the event's name as
  the ``event.name`` attribute; each count attribute ``a`` of event ``e`` is added
  to the counter ``hostcore.e.a``. Both carry the event's boolean and enum
  attributes as dimensions, whose values the catalog bounds, so cardinality stays
  bounded. Count attributes are never dimensions.

Logs leave in batches on a background thread; counters are collected every
``metric_interval_seconds``. :meth:`OtelSink.close` flushes both, so a
``hostcore run --once`` from cron delivers everything it emitted before it exits.

The providers are private to the sink (never the OpenTelemetry globals) so two
hosts in one process export independently. Events carry counts, booleans and
enums only, so nothing exported names a repository, path or title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from hostcore import __version__ as hostcore_version
from hostcore_otel_sink.plugin import SINK_NAME

if TYPE_CHECKING:
    from hostcore import Event
    from hostcore_otel_sink.plugin import OtelSinkConfig

LOGS_PATH = "/v1/logs"
METRICS_PATH = "/v1/metrics"
SCOPE = "hostcore"
OCCURRENCES = "hostcore.events"


class _ExportCounts:
    """How many export calls succeeded and failed, for ``hostcore status``."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0


class _CountingLogExporter(OTLPLogExporter):
    def __init__(self, counts: _ExportCounts, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._counts = counts

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        result = super().export(batch)
        if result is LogRecordExportResult.SUCCESS:
            self._counts.ok += 1
        else:
            self._counts.failed += 1
        return result


class _CountingMetricExporter(OTLPMetricExporter):
    def __init__(self, counts: _ExportCounts, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._counts = counts

    def export(self, metrics_data: Any, timeout_millis: float | None = 10_000,
               **kwargs: Any) -> MetricExportResult:
        result = super().export(metrics_data, timeout_millis, **kwargs)
        if result is MetricExportResult.SUCCESS:
            self._counts.ok += 1
        else:
            self._counts.failed += 1
        return result


class OtelSink:
    """Exports hostcore events to one OTLP/HTTP collector.

    :param config: the decoded ``[plugins.otel-sink]`` table; ``endpoint`` is set.
    :param descriptions: event name → description, used for counter descriptions.
    """

    name = SINK_NAME

    def __init__(self, config: OtelSinkConfig, *,
                 descriptions: Mapping[str, str] | None = None) -> None:
        if config.endpoint is None:
            raise ValueError("OtelSink needs [plugins.otel-sink] endpoint")
        base = config.endpoint.rstrip("/")
        self._descriptions = dict(descriptions or {})
        self._timeout_ms = int(config.timeout_seconds * 1000)
        self._log_exports = _ExportCounts()
        self._metric_exports = _ExportCounts()
        self._received = 0
        resource = Resource.create({"service.name": config.service_name,
                                    "service.version": hostcore_version})
        exporter_args = {"headers": dict(config.headers), "timeout": config.timeout_seconds}
        # shutdown_on_exit=False: the host closes the sink; an atexit hook per sink
        # would also keep every closed host's providers alive in a long process.
        self._logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._logs.add_log_record_processor(BatchLogRecordProcessor(
            _CountingLogExporter(self._log_exports, endpoint=base + LOGS_PATH, **exporter_args)))
        self._logger = self._logs.get_logger(SCOPE, hostcore_version)
        reader = PeriodicExportingMetricReader(
            _CountingMetricExporter(self._metric_exports, endpoint=base + METRICS_PATH,
                                    **exporter_args),
            export_interval_millis=config.metric_interval_seconds * 1000,
            export_timeout_millis=self._timeout_ms,
        )
        self._meters = MeterProvider(metric_readers=[reader], resource=resource,
                                     shutdown_on_exit=False)
        self._meter = self._meters.get_meter(SCOPE, hostcore_version)
        self._occurrences = self._meter.create_counter(
            OCCURRENCES, unit="{event}", description="Catalogued hostcore events emitted.")
        self._counters: dict[str, Any] = {}
        self._closed = False

    def receive(self, event: Event) -> None:
        attributes = dict(event.attributes)
        self._logger.emit(
            timestamp=int(event.ts * 1_000_000_000),
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=event.name,
            event_name=event.name,
            attributes=attributes,
        )
        dimensions = {k: v for k, v in attributes.items() if not _is_count(v)}
        self._occurrences.add(1, {"event.name": event.name, **dimensions})
        for key, value in attributes.items():
            if _is_count(value):
                self._counter(event.name, key).add(value, dimensions)
        self._received += 1

    def _counter(self, event_name: str, attribute: str) -> Any:
        metric = f"hostcore.{event_name}.{attribute}"
        counter = self._counters.get(metric)
        if counter is None:
            about = self._descriptions.get(event_name, "")
            summary = f"Sum of {attribute!r} over {event_name} events. {about}"
            counter = self._meter.create_counter(metric, description=summary.strip())
            self._counters[metric] = counter
        return counter

    def status(self) -> dict[str, int]:
        return {
            "events": self._received,
            "log_exports_ok": self._log_exports.ok,
            "log_exports_failed": self._log_exports.failed,
            "metric_exports_ok": self._metric_exports.ok,
            "metric_exports_failed": self._metric_exports.failed,
        }

    def close(self) -> None:
        """Flush pending log records and a final metric collection, then stop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._logs.force_flush(self._timeout_ms)
        finally:
            self._logs.shutdown()
            self._meters.shutdown(timeout_millis=self._timeout_ms)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
