"""The ``logging-sink`` plugin: registers a :class:`~hostcore_logging_sink.sink.LoggingSink`.

Configured by the ``[plugins.logging-sink]`` table of ``hostcore.toml``::

    [plugins.logging-sink]
    logger = "hostcore.events"   # the logger name records go to
    level = "INFO"               # DEBUG, INFO, WARNING, ERROR or CRITICAL

The CLI shows WARNING and above by default (``-v`` adds INFO, ``-vv`` DEBUG); an
embedder routes the logger with its own logging configuration.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from hostcore.plugin.markers import hookimpl
from hostcore_logging_sink.sink import LOGGER_NAME, LoggingSink

if TYPE_CHECKING:
    from hostcore.host import Host

PLUGIN_NAME = "logging-sink"

Level = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
_LEVELS: dict[str, int] = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}


class LoggingSinkConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.logging-sink]`` table. Unknown keys are errors, so typos show."""

    logger: Annotated[str, msgspec.Meta(min_length=1)] = LOGGER_NAME
    level: Level = "INFO"


@hookimpl
def hostcore_telemetry_sinks(host: Host) -> LoggingSink:
    config = host.plugin_config(PLUGIN_NAME, LoggingSinkConfig)
    return LoggingSink(config.logger, _LEVELS[config.level])
