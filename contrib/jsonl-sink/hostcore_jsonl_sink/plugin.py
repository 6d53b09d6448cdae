"""The ``jsonl-sink`` plugin: registers a :class:`~hostcore_jsonl_sink.sink.JsonlSink`.

Configured by the ``[plugins.jsonl-sink]`` table of ``hostcore.toml``::

    [plugins.jsonl-sink]
    max_bytes = 8388608   # rotate the live file before it passes this size
    keep = 3              # rotated files kept beside it (0: none, at most 100)

The files live in the plugin's state folder, ``<root>/plugins/jsonl-sink/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

from hostcore.plugin.markers import hookimpl
from hostcore_jsonl_sink.sink import KEEP, KEEP_MAX, MAX_BYTES, JsonlSink

if TYPE_CHECKING:
    from hostcore.host import Host

PLUGIN_NAME = "jsonl-sink"


class JsonlSinkConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.jsonl-sink]`` table. Unknown keys are errors, so typos show."""

    max_bytes: Annotated[int, msgspec.Meta(gt=0)] = MAX_BYTES
    keep: Annotated[int, msgspec.Meta(ge=0, le=KEEP_MAX)] = KEEP


@hookimpl
def hostcore_telemetry_sinks(host: Host) -> JsonlSink:
    config = host.plugin_config(PLUGIN_NAME, JsonlSinkConfig)
    return JsonlSink(host.state_dir(PLUGIN_NAME), max_bytes=config.max_bytes, keep=config.keep)
