"""A batch's usage, added to the store's aggregate by the append that inserts it.

Staging notes the batch's rows with usage (:func:`note`: each usage checked, each
time's bucket worked out from its text) on the thread that read them; the append
calls :func:`add_usage` in its own transaction with those of them it actually
inserted (never one a key or a purge refused), so the aggregate and the
rows commit together or not at all. Only rows carrying a ``usage`` payload reach
here, and their totals are summed in Python per scope, session, model and
quarter-hour first: the store then runs one upsert per bucket, not one per row
(see :data:`hostcore.evidence.schema.USAGE_DDL`).
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from hostcore.evidence import schema

__all__ = ["Counted", "Noted", "add_usage", "note"]

_NONE_ABOVE = (0, 0, 0, 0)
_encoder = msgspec.json.Encoder()
# Rows per statement of responses and of buckets (as many as SQLite takes, if fewer).
_CHUNK_ROWS = 2_500
# Seconds in one bucket of the aggregate (the delete trigger's 15 * 60).
_BUCKET_SECONDS = 15 * 60
# A stored time in the canonical form (hostcore.timestamps.canonical), which nearly
# every row has: its bucket is worked out here from the text, with the same result
# as SQLite's reading, which the delete trigger uses. Any other text is asked of
# SQLite, and so is a last second's ".999…", which SQLite's rounding to milliseconds
# may carry into the next minute, hence the next quarter-hour.
_SHAPE = (r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-5][0-9]:[0-5][0-9]"
          r"\.[0-9]{6}Z")
# A batch of them joined by newlines: one match checks the whole batch (its rows'
# stamps, made canonical by staging, nearly always are). Text, compiled by re at the
# first batch with usage: a start that stages none pays nothing for it.
_SHAPE_LINES = f"(?:{_SHAPE}\n)*{_SHAPE}"
# The bucket of each minute seen (its first 16 characters), None for a text that
# names no moment here; kept to this many minutes, about a week of transcripts.
_MINUTES_KEPT = 10_000
_minutes: dict[str, int | None] = {}


class _Usage(msgspec.Struct, gc=False):
    """A row's ``usage`` as hostcore.evidence.usage_fields writes it; checked by
    msgspec for a whole batch at once (a bool or a float is no count)."""

    model: str
    response: str
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    above_tier: tuple[int, int, int, int] = _NONE_ABOVE


# (index, session id, canonical ts, the payload's usage): a row of a batch with usage.
Found = tuple[int, str, str, Any]
# A row of a batch with usage as noted before its insert: (index, session id, canonical
# ts, the usage checked (None: of another shape, not counted), its bucket worked out
# from the time's text (None: SQLite is asked)).
Noted = tuple[int, str, str, _Usage | None, int | None]
# (position, scope id, session id, canonical ts, usage, bucket) of one inserted row
# with usage: a Noted row and where it went.
Counted = tuple[int, int, str, str, _Usage | None, int | None]
# What the aggregate sums a response under: scope id, session id, model, bucket.
Bucket = tuple[int, str, str, int]


def note(found: list[Found], *, canonical: bool = False) -> list[Noted]:
    """``found`` checked and bucketed, ahead of the transaction that inserts the rows:
    called while the batch is staged, on the thread that read it, which has the rows
    at hand, so the append runs little but SQLite. ``canonical``: every time is known
    to be in the canonical form already (staging matched them all), so none is
    matched again."""
    usages = _checked([usage for _, _, _, usage in found])
    buckets = _text_buckets([ts for _, _, ts, _ in found], canonical=canonical)
    return [(index, session, ts, usage, bucket) for (index, session, ts, _), usage, bucket
            in zip(found, usages, buckets, strict=True)]


def add_usage(db: sqlite3.Connection, counted: Sequence[Counted]) -> None:
    """Count the responses of ``counted`` (rows just inserted, in position order)
    that the store has not counted yet, each once: the first row naming a response
    counts it, under its own position. A usage of another shape (a source of its
    own) is stored with its row and not counted."""
    if not counted:
        return
    # SQLite's own reading of the times not worked out from their text (it rounds
    # fractions to milliseconds, so 10:14:59.9999 is 10:15's bucket), as the delete
    # trigger will read them.
    ask = [found[3] for found in counted if found[5] is None and found[4] is not None]
    asked: dict[str, int | None] = (
        dict(db.execute(schema.BUCKETS, (_encoder.encode(ask),))) if ask else {})
    # The batch's first row of each response, recorded unless one is recorded
    # already: the insert's own look-up of the key tells, so the common batch, every
    # response new, asks nothing more of SQLite. Their totals are summed in the same
    # pass, as if every one were new; the few counted before come out afterwards.
    firsts: dict[str, tuple[int, Bucket, _Usage]] = {}
    totals: dict[Bucket, list[int]] = {}
    for position, scope, session, ts, usage, bucket in counted:
        if usage is None or usage.response in firsts:
            continue
        if bucket is None and (bucket := asked.get(ts)) is None:
            continue  # no time SQLite reads: in no bucket
        key = (scope, session, usage.model, bucket)
        firsts[usage.response] = (position, key, usage)
        # Written out rather than a call: this runs for every response of a batch.
        total = totals.get(key)
        if total is None:
            totals[key] = [1, usage.input_tokens, usage.output_tokens,
                           usage.cache_creation_input_tokens, usage.cache_read_input_tokens,
                           *usage.above_tier]
            continue
        total[0] += 1
        total[1] += usage.input_tokens
        total[2] += usage.output_tokens
        total[3] += usage.cache_creation_input_tokens
        total[4] += usage.cache_read_input_tokens
        if usage.above_tier is not _NONE_ABOVE:
            for at, n in enumerate(usage.above_tier, start=5):
                total[at] += n
    if not firsts:
        return
    recorded = schema.insert_chunked(db, schema.count_responses, [
        value for response, first in firsts.items() for value in (response, first[0])],
        2, _CHUNK_ROWS)
    if recorded != len(firsts):
        # Some were counted by earlier rows, which all sit before this batch's.
        for (response,) in db.execute(schema.COUNTED_BEFORE,
                                      (_encoder.encode(list(firsts)), counted[0][0])):
            _, key, usage = firsts[response]
            total = totals[key]
            for at, n in enumerate((1, usage.input_tokens, usage.output_tokens,
                                    usage.cache_creation_input_tokens,
                                    usage.cache_read_input_tokens, *usage.above_tier)):
                total[at] -= n
            if total[0] == 0:
                del totals[key]
    schema.insert_chunked(db, schema.add_usage, [
        value for key, total in totals.items()
        for value in (*key, *total[:5], _above_text(total[5:]))], 10, _CHUNK_ROWS)


def _text_buckets(times: list[str], *, canonical: bool = False) -> list[int | None]:
    """The bucket of each of ``times`` worked out from its text, the same as SQLite's
    reading; None where SQLite must be asked. ``canonical``: see :func:`note`."""
    joined = "\n".join(times)
    # ":59.999" can only be a last second's (in the canonical form, a minute is
    # followed by ":SS"); a newline in a time could pass for two times: the count
    # says there is none.
    if ":59.999" in joined or not (canonical or (
            joined.count("\n") == len(times) - 1
            and re.fullmatch(_SHAPE_LINES, joined) is not None)):
        return [_text_bucket(ts) for ts in times]
    minutes = _minutes
    needed = {ts[:16] for ts in times}
    missing = needed - minutes.keys()
    if len(minutes) + len(missing) > _MINUTES_KEPT:
        minutes.clear()
        missing = needed
    for minute in missing:
        minutes[minute] = _minute_bucket(minute)
    return [minutes[ts[:16]] for ts in times]


def _text_bucket(ts: str) -> int | None:
    """The bucket of one time worked out from its text, or None (see _text_buckets)."""
    if re.fullmatch(_SHAPE, ts) is None or ts[17:23] == "59.999":
        return None
    return _minute_bucket(ts[:16])


def _minute_bucket(minute: str) -> int | None:
    """The bucket of ``YYYY-MM-DDTHH:MM``, or None when SQLite must say: no such day
    or hour (SQLite reads some of those, as another day), or before 1970 (SQLite's
    division truncates where Python's floors)."""
    if minute < "1970":
        return None
    try:
        moment = dt.datetime(int(minute[:4]), int(minute[5:7]), int(minute[8:10]),
                             int(minute[11:13]), int(minute[14:16]), tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(moment.timestamp()) // _BUCKET_SECONDS


def _checked(found: list[Any]) -> list[_Usage | None]:
    """Each of ``found`` as a :class:`_Usage`, or None when it is not one: the whole
    list in one call, and one by one only when some of it does not fit."""
    try:
        return list(msgspec.convert(found, list[_Usage]))
    except msgspec.ValidationError:
        return [_one(usage) for usage in found]


def _one(usage: Any) -> _Usage | None:
    try:
        return msgspec.convert(usage, _Usage)
    except msgspec.ValidationError:
        return None


def _above_text(above: list[int]) -> str:
    return _encoder.encode(above).decode() if any(above) else "[0,0,0,0]"
