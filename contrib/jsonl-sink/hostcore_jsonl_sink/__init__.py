"""hostcore-jsonl-sink: every telemetry event as one line of an append-only JSONL file.

The plugin itself lives in :mod:`hostcore_jsonl_sink.plugin` (the entry point);
the file format, rotation and durability rules in :mod:`hostcore_jsonl_sink.sink`.
"""
