"""Timestamps: one parser and one writer for every wall-clock time hostcore keeps.

Times are kept as UTC text ending in ``Z``, at one of two precisions:

* ``seconds`` — ``YYYY-MM-DDTHH:MM:SSZ``: ledger records and plugin state, where
  a person reads the value and a second is fine-grained enough;
* ``micro`` — ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: evidence rows, whose text order
  must be time order so a range purge is one text comparison.

Both are fixed width (years are written with four digits, ``0999`` too), so text
order is time order. A wall-clock time read back from state may lie in the future
(a clock that was wrong when it was written): :func:`is_future` says whether it
lies further ahead than a tolerance, so callers treat it as due instead of fresh.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal

Precision = Literal["seconds", "micro"]

_SECONDS_SHAPE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
# UTC with a "Z" and up to six fraction digits: what agents write (Claude Code's
# ".466Z", Codex's ".123456Z"). canonical() rewrites these by text alone.
_UTC_SHAPE = re.compile(
    r"[0-9]{4}-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?Z")
# Dates a fast-path timestamp named, with whether each exists (2025-02-30 does
# not). Bounded: transcripts name few distinct days, and a flood of bogus ones
# only costs the slow path once the cache is full.
_DATES: dict[str, bool] = {}
_DATES_CACHED = 4096


def utc_now() -> datetime:
    """The current moment, timezone-aware, in UTC."""
    return datetime.now(UTC)


def parse(text: object) -> datetime | None:
    """An aware datetime for ISO-8601 ``text`` (no offset means UTC), else ``None``.

    A value that names no representable UTC moment (``9999-12-31T23:59:59-01:00``
    overflows when converted) is ``None`` too: callers count it, never crash.
    """
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def parse_exact(text: object) -> datetime | None:
    """The moment ``text`` names if it is exactly in ``seconds`` form, else ``None``."""
    if not isinstance(text, str) or not _SECONDS_SHAPE.match(text):
        return None
    return parse(text)


def format_utc(moment: datetime, precision: Precision = "seconds") -> str:
    """``moment`` as UTC text at ``precision`` (see the module docstring)."""
    # Written by hand, not strftime: %Y drops the leading zeros of years before
    # 1000 on glibc, which would break text order; and this runs once per row.
    m = moment.astimezone(UTC)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{m.microsecond:06d}Z" if precision == "micro" else f"{text}Z"


def canonical(text: str, precision: Precision = "micro") -> str:
    """``text`` rewritten in the sortable form, or unchanged when it does not parse
    (a range never matches an unparseable value).

    UTC text with a ``Z`` and at most six fraction digits (nearly every
    transcript line) is rewritten by text alone, with the same result as parsing
    it: this runs once per ingested row, and building a datetime costs more than
    the rest of the row's conversion.
    """
    if precision == "micro":
        found = _UTC_SHAPE.fullmatch(text)
        if found is not None and _exists(text[:10], found):
            fraction = found.group(6)
            if fraction is not None and len(fraction) == 6:
                return text
            return f"{text[:19]}.{(fraction or '').ljust(6, '0')}Z"
    moment = parse(text)
    return text if moment is None else format_utc(moment, precision)


def _exists(date: str, found: re.Match[str]) -> bool:
    """Whether a :data:`_UTC_SHAPE` match names a real moment (what parsing checks)."""
    hour, minute, second = int(found.group(3)), int(found.group(4)), int(found.group(5))
    if hour > 23 or minute > 59 or second > 59:
        return False
    known = _DATES.get(date)
    if known is None:
        try:
            datetime(int(date[:4]), int(found.group(1)), int(found.group(2)))
            known = True
        except ValueError:
            known = False
        if len(_DATES) < _DATES_CACHED:
            _DATES[date] = known
    return known


def is_future(moment: datetime, *, now: datetime | None = None,
              tolerance: timedelta = timedelta(minutes=5)) -> bool:
    """True when ``moment`` lies more than ``tolerance`` after ``now``.

    A stamp from the future was written by a wrong clock: trusting it would make
    the thing it dates look fresh until the real clock catches up.
    """
    return moment - (now or utc_now()) > tolerance
