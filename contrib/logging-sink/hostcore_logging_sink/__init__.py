"""hostcore-logging-sink: every telemetry event as a record of the standard ``logging``.

The plugin (the entry point) is :mod:`hostcore_logging_sink.plugin`; the sink
itself is :class:`hostcore_logging_sink.sink.LoggingSink`.
"""
