"""The plugin's telemetry events: counts, booleans and enums, never a name or a path."""

from __future__ import annotations

from hostcore.telemetry import EventSpec
from hostcore_github_capture.stamps import FIELDS

# What starts a revalidation pass, and what a pass reads; defined here, with the
# events that report them, so cataloguing the events loads no sidecar code.
TRIGGERS = ("initial", "fingerprint", "replaced", "regressed", "age", "requested")
UNITS = ("rows", "tuples")

EVENTS = (
    EventSpec(
        "capture.revalidation_started",
        {"trigger": TRIGGERS, "unit": UNITS, "prior_inventory": int, "restarted": bool},
        "A revalidation pass of the observed-repositories inventory started: why, how "
        "many repositories the inventory held, and whether it replaced a pass under way.",
    ),
    EventSpec(
        "capture.revalidation_slice",
        {"unit": UNITS, "positions_read": int, "rows_read": int, "tuples_read": int,
         "examined": int, "budget": int, "partitions_done": int, "partitions_total": int,
         "confirmed": int},
        "A revalidation tick used its whole budget: positions examined (a pass by rows), "
        "rows or tuples the seam let out, what the tick charged to its budget in its unit "
        "(positions or tuple ids, withheld or not; never more than the budget), the "
        "budget, partitions completed out of those the pass noted, repositories "
        "confirmed so far.",
    ),
    EventSpec(
        "capture.revalidation_completed",
        {"unit": UNITS, "positions_read": int, "rows_read": int, "tuples_read": int,
         "confirmed": int, "retired": int, "admitted": int, "slices": int,
         "unrecognised": int},
        "A revalidation pass swapped in a new inventory: positions examined, rows or "
        "tuples read over the pass, repositories confirmed, retired and newly admitted, "
        "ticks taken, and remotes that were not GitHub repositories.",
    ),
    EventSpec(
        "capture.inventory_extended",
        {"positions_read": int, "rows_read": int, "added": int, "unrecognised": int,
         "budget_exhausted": bool},
        "An ordinary tick read what grown or new partitions hold after their cursors: "
        "positions examined, rows the seam let out, repositories added, remotes that were "
        "not GitHub repositories, and whether the budget stopped it.",
    ),
    EventSpec(
        "capture.future_stamps",
        {"field": FIELDS, "count": int},
        "Times in the plugin's state lay further in the future than the plugin ever "
        "schedules them (written while the clock was wrong): which field and how many. "
        "Each counts as due: a pass starts, a repository is polled, a backoff ends.",
    ),
    EventSpec(
        "capture.polled",
        {"repositories": int, "requests": int, "not_modified": int, "events_stored": int,
         "failed": int, "gone": int, "ignored": int, "rate_limited": bool,
         "budget_exhausted": bool, "unavailable": bool},
        "A capture step polled repository events through gh: repositories polled, "
        "requests made, 304 answers, new events stored, failed and not-found answers, "
        "repositories left out as ignored, and whether a rate limit, the request budget "
        "or an unusable gh stopped it.",
    ),
)
