"""Wall-clock times read back from state, checked against a clock that may have been wrong.

The plugin keeps times as seconds since the epoch (``derived_at``, ``poll_after``,
``polled_at``, ``backoff_until``). A time written while the clock ran ahead lies
in the future once the clock is put right, and would make what it dates look
fresh, or not yet due, until the real clock catches up: a derivation stamped a
month ahead would keep the seven-day backstop off for five weeks. So every
comparison goes through :func:`ahead`: a time further ahead than anything this
plugin ever schedules, plus :data:`FUTURE_TOLERANCE`, was written by a wrong
clock and counts as due. The rule itself is :func:`hostcore.timestamps.is_future`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hostcore.timestamps import is_future

# How far past the furthest time the plugin schedules a stored time may lie and
# still be believed: clocks of one machine disagree by seconds, not minutes.
FUTURE_TOLERANCE = timedelta(minutes=5)

# The state fields a wrong clock can push into the future (the event's enum).
FIELDS = ("derived_at", "poll_after", "polled_at", "backoff_until")


def ahead(stamp: float, now: float, *, horizon: float = 0.0) -> bool:
    """True when ``stamp`` lies more than the tolerance after ``now + horizon``.

    ``horizon`` is the longest delay the plugin schedules into the field read
    (0 for times that record when something happened).
    """
    if stamp <= now + horizon:
        return False  # the common case, decided without building datetimes
    try:
        return is_future(_utc(stamp), now=_utc(now + horizon), tolerance=FUTURE_TOLERANCE)
    except (OverflowError, OSError, ValueError):
        # Beyond what a datetime holds (a hand-edited file): compare as numbers.
        return stamp > now + horizon + FUTURE_TOLERANCE.total_seconds()


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
