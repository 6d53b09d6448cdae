"""A batch's usage, added to the store's aggregate by the append that inserts it.

The append calls :func:`add_usage` in its own transaction with the rows it
actually inserted (never one a key or a purge refused), so the aggregate and the
rows commit together or not at all. Only rows carrying a ``usage`` payload reach
here, and their totals are summed in Python per scope, session, model and
quarter-hour first: the store then runs one upsert per bucket, not one per row
(see :data:`hostcore.evidence.schema.USAGE_DDL`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from hostcore.evidence import schema

__all__ = ["Counted", "add_usage"]

# (position, scope id, session id, canonical ts, the payload's usage): one inserted row.
Counted = tuple[int, int, str, str, Any]
_NONE_ABOVE = (0, 0, 0, 0)
_encoder = msgspec.json.Encoder()


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


def add_usage(db: sqlite3.Connection, counted: Sequence[Counted]) -> None:
    """Count the responses of ``counted`` (rows just inserted, in position order)
    that the store has not counted yet, each once: the first row naming a response
    counts it, under its own position. A usage of another shape (a source of its
    own) is stored with its row and not counted."""
    if not counted:
        return
    usages = _checked([found[4] for found in counted])
    # SQLite's own reading of each time, as the delete trigger will read it (it
    # rounds fractions to milliseconds, so 10:14:59.9999 is 10:15's bucket).
    buckets: dict[str, int | None] = dict(db.execute(
        schema.BUCKETS, (_encoder.encode(list({found[3] for found in counted})),)))
    seen = {response for (response,) in db.execute(
        schema.COUNTED_RESPONSES,
        (_encoder.encode([u.response for u in usages if u is not None]),))}
    firsts: list[tuple[str, int]] = []
    totals: dict[tuple[int, str, str, int], list[int]] = {}
    for (position, scope, session, ts, _), usage in zip(counted, usages, strict=True):
        if usage is None or usage.response in seen:
            continue
        bucket = buckets.get(ts)
        if bucket is None:
            continue
        seen.add(usage.response)
        firsts.append((usage.response, position))
        key = (scope, session, usage.model, bucket)
        total = totals.get(key)
        if total is None:
            totals[key] = [1, usage.input_tokens, usage.output_tokens,
                           usage.cache_creation_input_tokens, usage.cache_read_input_tokens,
                           *usage.above_tier]
        else:
            total[0] += 1
            total[1] += usage.input_tokens
            total[2] += usage.output_tokens
            total[3] += usage.cache_creation_input_tokens
            total[4] += usage.cache_read_input_tokens
            if usage.above_tier is not _NONE_ABOVE:
                for at, n in enumerate(usage.above_tier, start=5):
                    total[at] += n
    db.executemany(schema.COUNT_RESPONSE, firsts)
    db.executemany(schema.ADD_USAGE, [
        (*key, *total[:5], _above_text(total[5:])) for key, total in totals.items()])


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
