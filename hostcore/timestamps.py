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

import functools
import re
from datetime import UTC, datetime, timedelta
from typing import Literal

Precision = Literal["seconds", "micro"]

# Patterns kept as text: re compiles each on first use and caches it, so a start
# that never needs one (most never do) pays nothing for it.
_SECONDS_SHAPE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"
# UTC with a "Z" and up to six fraction digits, every field in range: what
# agents write (Claude Code's ".466Z", Codex's ".123456Z"). canonical() rewrites
# these by text alone; only a day past the 28th needs its month checked.
_UTC_SHAPE = (
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?Z")
# The same shape with days 01 to 28, which every month has, and no year 0000:
# nearly every stamp an agent writes, needing no check beyond the match.
_COMMON_UTC_SHAPE = re.compile(
    r"(?!0000)[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?Z")
_common_utc = _COMMON_UTC_SHAPE.fullmatch
_CANONICAL_LENGTH = len("2025-07-28T22:54:41.466000Z")
# What replaces the "Z" of a matched stamp, by its length, to give six fraction digits.
_PADDING = {20: ".000000Z", **{_CANONICAL_LENGTH - n: "0" * n + "Z" for n in range(1, 6)}}


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
    if not isinstance(text, str) or not re.fullmatch(_SECONDS_SHAPE, text):
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
    if precision == "micro" and (
            _common_utc(text) is not None
            or (re.fullmatch(_UTC_SHAPE, text) is not None and text[:4] != "0000"
                and _day_exists(text[:10]))):
        size = len(text)
        return text if size == _CANONICAL_LENGTH else text[:-1] + _PADDING[size]
    moment = parse(text)
    return text if moment is None else format_utc(moment, precision)


# A batch of common stamps (see _COMMON_UTC_SHAPE) joined by newlines; text, compiled
# at its first batch (a start that stages none pays nothing for it).
_COMMON_LINES = f"(?:{_COMMON_UTC_SHAPE.pattern}\n)*{_COMMON_UTC_SHAPE.pattern}"


def canonical_all(texts: list[str]) -> tuple[list[str], bool]:
    """``[canonical(text) for text in texts]``, for a batch of stamps (an ingest's),
    and whether every one of them is now in the ``micro`` form.

    When every stamp has the common shape (UTC, a ``Z``, a day from 1 to 28:
    nearly every batch of transcript lines) one match checks them all and the
    padding is done by text, a call for the batch when they have one length: the
    stamp by stamp call costs about a third of what staging a row does. Any other
    batch is rewritten stamp by stamp (and some of it may not parse: False). Text
    is what it takes (``TypeError`` else).
    """
    joined = "\n".join(texts)
    # A newline in a stamp could pass for two stamps: the count says there is none.
    if (not texts or joined.count("\n") != len(texts) - 1
            or re.fullmatch(_COMMON_LINES, joined) is None):
        return [canonical(text) for text in texts], False
    sizes = set(map(len, texts))
    if len(sizes) > 1:
        padding = _PADDING
        return [text if len(text) == _CANONICAL_LENGTH else text[:-1] + padding[len(text)]
                for text in texts], True
    size = sizes.pop()
    if size == _CANONICAL_LENGTH:
        return list(texts), True
    # A "Z" ends each stamp and is in none elsewhere: the shape was matched.
    return (joined + "\n").replace("Z\n", _PADDING[size] + "\n")[:-1].split("\n"), True


@functools.lru_cache(maxsize=1024)
def _day_exists(date: str) -> bool:
    """Whether ``YYYY-MM-DD`` (29th to 31st) is a day of its month."""
    try:
        datetime(int(date[:4]), int(date[5:7]), int(date[8:10]))
    except ValueError:
        return False
    return True


def is_future(moment: datetime, *, now: datetime | None = None,
              tolerance: timedelta = timedelta(minutes=5)) -> bool:
    """True when ``moment`` lies more than ``tolerance`` after ``now``.

    A stamp from the future was written by a wrong clock: trusting it would make
    the thing it dates look fresh until the real clock catches up.
    """
    return moment - (now or utc_now()) > tolerance
