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
_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
          "cache_read_input_tokens")
_NONE_ABOVE = "[0,0,0,0]"
_encoder = msgspec.json.Encoder()


def add_usage(db: sqlite3.Connection, counted: Sequence[Counted]) -> None:
    """Count the responses of ``counted`` (rows just inserted, in position order)
    that the store has not counted yet, each once: the first row naming a response
    counts it, under its own position."""
    usable = [(position, scope, session, ts, parts) for position, scope, session, ts, usage
              in counted if (parts := _parts(usage)) is not None]
    if not usable:
        return
    # SQLite's own reading of each time, as the delete trigger will read it (it
    # rounds fractions to milliseconds, so 10:14:59.9999 is 10:15's bucket).
    buckets: dict[str, int | None] = dict(db.execute(
        schema.BUCKETS, (_encoder.encode(list({found[3] for found in usable})),)))
    found: list[tuple[int, int, str, str, str, int, list[int], list[int]]] = []
    for position, scope, session, ts, (response, model, counts, above) in usable:
        bucket = buckets.get(ts)
        if bucket is not None:
            found.append((position, scope, session, response, model, bucket, counts, above))
    if not found:
        return
    seen = {response for (response,) in db.execute(
        schema.COUNTED_RESPONSES, (_encoder.encode([row[3] for row in found]),))}
    firsts: list[tuple[str, int]] = []
    totals: dict[tuple[int, str, str, int], list[int]] = {}
    for position, scope, session, response, model, bucket, counts, above in found:
        if response in seen:
            continue
        seen.add(response)
        firsts.append((response, position))
        key = (scope, session, model, bucket)
        total = totals.get(key)
        if total is None:
            totals[key] = [1, *counts, *above]
        else:
            total[0] += 1
            for at, n in enumerate((*counts, *above), start=1):
                total[at] += n
    db.executemany(schema.COUNT_RESPONSE, firsts)
    db.executemany(schema.ADD_USAGE, [
        (*key, *total[:5], _above_text(total[5:]))
        for key, total in totals.items()])


def _parts(usage: Any) -> tuple[str, str, list[int], list[int]] | None:
    """(response, model, the four counts, the four above the tier) of one row's
    usage; None when it holds no countable response (not written by
    hostcore.evidence.usage_fields: a source of its own shape)."""
    if type(usage) is not dict:
        return None
    response, model = usage.get("response"), usage.get("model")
    counts: list[Any] = [usage.get(kind) for kind in _KINDS]
    above = usage.get("above_tier", [0, 0, 0, 0])
    if not (type(response) is str and type(model) is str and all(type(n) is int for n in counts)
            and type(above) is list and len(above) == 4
            and all(type(n) is int for n in above)):
        return None
    return response, model, counts, above


def _above_text(above: list[int]) -> str:
    return _NONE_ABOVE if not any(above) else _encoder.encode(above).decode()
