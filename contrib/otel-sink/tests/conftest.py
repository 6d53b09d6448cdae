"""A small OTLP/HTTP collector on 127.0.0.1 that decodes what it receives.

It speaks the real protocol: protobuf ``ExportLogsServiceRequest`` and
``ExportMetricsServiceRequest`` bodies POSTed to ``/v1/logs`` and ``/v1/metrics``,
answered with the matching (empty) protobuf response.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

REQUESTS = {
    "/v1/logs": (logs_service_pb2.ExportLogsServiceRequest,
                 logs_service_pb2.ExportLogsServiceResponse),
    "/v1/metrics": (metrics_service_pb2.ExportMetricsServiceRequest,
                    metrics_service_pb2.ExportMetricsServiceResponse),
}


@dataclass
class LogRecord:
    name: str
    body: str
    attributes: dict[str, Any]
    time_unix_nano: int


@dataclass
class Received:
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)

    def log_records(self) -> list[LogRecord]:
        out = []
        for request in self.logs:
            for resource_logs in request.resource_logs:
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        out.append(LogRecord(
                            name=record.event_name,
                            body=record.body.string_value,
                            attributes={kv.key: _value(kv.value) for kv in record.attributes},
                            time_unix_nano=record.time_unix_nano,
                        ))
        return out

    def resource_attributes(self) -> list[dict[str, Any]]:
        return [{kv.key: _value(kv.value) for kv in rl.resource.attributes}
                for request in self.logs for rl in request.resource_logs]

    def counter_points(self) -> dict[str, list[tuple[dict[str, Any], int]]]:
        """Metric name → the data points of its latest (cumulative) export."""
        latest: dict[str, list[tuple[dict[str, Any], int]]] = {}
        for request in self.metrics:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        latest[metric.name] = [
                            ({kv.key: _value(kv.value) for kv in point.attributes}, point.as_int)
                            for point in metric.sum.data_points
                        ]
        return latest


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.received = Received()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                types = REQUESTS.get(self.path)
                if types is None:
                    self.send_error(404)
                    return
                request_type, response_type = types
                request = request_type()
                request.ParseFromString(body)
                received.raw.append(body)
                received.headers.append({k.lower(): v for k, v in self.headers.items()})
                (received.logs if self.path == "/v1/logs" else received.metrics).append(request)
                payload = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads what arrived, not an access log."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def module_otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver that outlives each test's hosts, so their closing flush lands."""
    receiver = OtlpReceiver()
    yield receiver
    receiver.stop()
