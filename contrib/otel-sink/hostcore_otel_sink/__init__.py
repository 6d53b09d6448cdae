"""hostcore-otel-sink: hostcore's catalogued telemetry events, exported over OTLP/HTTP.

The plugin lives in :mod:`hostcore_otel_sink.plugin`; the sink itself, which
imports the OpenTelemetry SDK, in :mod:`hostcore_otel_sink.sink`. Importing this
package imports neither.
"""

__version__ = "0.1.0"
