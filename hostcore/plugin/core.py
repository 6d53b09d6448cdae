"""Built-in: the tick loop's and the plugin loader's own telemetry events."""

from __future__ import annotations

from hostcore.plugin.markers import hookimpl
from hostcore.telemetry import EventSpec

EVENTS = (
    EventSpec(
        "tick.completed",
        {"steps": int, "failed": int, "skipped": int, "pending": bool, "duration_ms": int},
        "One tick ran: how many steps ran, failed and were skipped (stop requested), "
        "and whether any worker reported pending work.",
    ),
    EventSpec(
        "plugins.loaded",
        {"loaded": int, "failed": int, "blocked": int, "builtin": int},
        "A host finished loading plugins: how many of each status.",
    ),
)


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS
