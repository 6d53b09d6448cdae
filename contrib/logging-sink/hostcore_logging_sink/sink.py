"""A telemetry sink that logs each event through :mod:`logging`.

The message is the event name followed by its attributes in name order,
``tick.completed duration_ms=3 failed=0 pending=False``. The record also carries
the event itself as ``record.hostcore_event`` (a :class:`hostcore.telemetry.Event`)
so a handler can format it as it likes. Attributes are counts, booleans and enum
values only, so nothing logged here names a path or a repository.
"""

from __future__ import annotations

import logging

from hostcore.telemetry import Event

LOGGER_NAME = "hostcore.events"


class LoggingSink:
    """Logs every event to ``logger`` at ``level`` (a :mod:`logging` level number)."""

    name = "logging"

    def __init__(self, logger: str = LOGGER_NAME, level: int = logging.INFO) -> None:
        self.logger = logging.getLogger(logger)
        self.level = level

    def receive(self, event: Event) -> None:
        # Formatting is skipped entirely when nobody listens at this level.
        if not self.logger.isEnabledFor(self.level):
            return
        rendered = " ".join(f"{k}={v}" for k, v in sorted(event.attributes.items()))
        self.logger.log(self.level, "%s %s", event.name, rendered,
                        extra={"hostcore_event": event})
