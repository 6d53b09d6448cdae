"""The hostcore plugin: reads ``[plugins.otel-sink]`` and registers the OTLP sink.

Configuration (``hostcore.toml``)::

    [plugins.otel-sink]
    endpoint = "http://127.0.0.1:4318"   # an OTLP/HTTP collector; /v1/logs and /v1/metrics
    service_name = "hostcore"            # resource attribute service.name
    headers = { authorization = "Bearer ..." }
    timeout_seconds = 10
    metric_interval_seconds = 60

Without an ``endpoint`` the sink is registered but unavailable (``hostcore
plugins`` says why) and the OpenTelemetry SDK is never imported, so installing the
plugin costs nothing until it is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

from hostcore import hookimpl

if TYPE_CHECKING:
    from hostcore import Event, Host

CONFIG_TABLE = "otel-sink"
SINK_NAME = "otel"

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]
HttpUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://[^/\s]+(/\S*)?$")]


class OtelSinkConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.otel-sink]`` table."""

    endpoint: HttpUrl | None = None
    service_name: str = "hostcore"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout_seconds: PositiveSeconds = 10.0
    metric_interval_seconds: PositiveSeconds = 60.0


class UnconfiguredSink:
    """Stands in for the OTLP sink until an endpoint is configured: it drops events
    and says, through ``availability()``, what to set."""

    name = SINK_NAME

    def availability(self) -> str | None:
        return f"no collector endpoint: set endpoint in [plugins.{CONFIG_TABLE}]"

    def receive(self, event: Event) -> None:
        """Nothing to export to; the event is not kept."""


@hookimpl
def hostcore_telemetry_sinks(host: Host) -> object:
    config = host.plugin_config(CONFIG_TABLE, OtelSinkConfig)
    if config.endpoint is None:
        return UnconfiguredSink()
    from hostcore_otel_sink.sink import OtelSink

    descriptions = {spec.name: spec.description for spec in host.catalog}
    return OtelSink(config, descriptions=descriptions)
