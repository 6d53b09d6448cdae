"""Usage reports: tokens and cost per day, session, project, model or machine.

A report reads the store's ``usage`` aggregate (added to by the append that
stores the rows, taken from by a trigger as rows go; see
:mod:`hostcore.evidence.usage_totals`), never the rows: its work grows with
the sessions, models and quarter-hours seen, not with the rows stored. Cost is
worked out at read time from a :class:`~hostcore.evidence.prices.PriceTable`, so
a changed price applies to every day already stored. ``exportable`` keeps only
the scopes the withholding policy lets leave, by the same verdicts the export
seam applies to rows.
"""

from __future__ import annotations

import datetime as dt
import socket
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from zoneinfo import ZoneInfo

import msgspec

from hostcore.evidence import schema
from hostcore.evidence.prices import Price, PriceTable
from hostcore.evidence.store import StoreError, describe_failure

__all__ = ["BY", "Entry", "Report", "Tokens", "read_report", "utc_bounds"]

# What a report can be cut by.
BY = ("day", "session", "project", "model", "machine")
# Seconds in one bucket of the aggregate.
BUCKET_SECONDS = 15 * 60
# The scopes a report may use: (id, directory, source id) -> the ids withheld.
Withheld = Callable[[Iterable[tuple[int, str, str]]], list[int]]


class Tokens(msgspec.Struct, kw_only=True):
    """Tokens of each kind and what they cost (``None``: no price for any model)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float | None = None

    def add(self, counts: tuple[int, int, int, int], cost: float | None) -> None:
        self.input_tokens += counts[0]
        self.output_tokens += counts[1]
        self.cache_creation_input_tokens += counts[2]
        self.cache_read_input_tokens += counts[3]
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost


class Entry(Tokens, kw_only=True):
    """One line of a report: its key (a day is ``YYYY-MM-DD``) and its models."""

    key: str
    models: dict[str, Tokens] = msgspec.field(default_factory=dict)


class Report(msgspec.Struct):
    """What ``hostcore usage --json`` prints."""

    by: str
    entries: list[Entry]
    totals: Tokens


def utc_bounds(since: dt.date | None, until: dt.date | None,
               zone: ZoneInfo | None) -> tuple[int, int]:
    """The buckets from the start of day ``since`` to the end of day ``until`` in
    ``zone`` (the local zone when ``None``), as ``[first, past)``."""
    first = 0 if since is None else _midnight(since, zone) // BUCKET_SECONDS
    past = (2**62 if until is None
            else _midnight(until + dt.timedelta(days=1), zone) // BUCKET_SECONDS)
    return first, past


def _midnight(day: dt.date, zone: ZoneInfo | None) -> int:
    if zone is None:
        return int(time.mktime((day.year, day.month, day.day, 0, 0, 0, 0, 0, -1)))
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=zone).timestamp())


def read_report(path: Path, prices: PriceTable, *, by: str, zone: ZoneInfo | None = None,
                since: dt.date | None = None, until: dt.date | None = None,
                source: str | None = None, withheld: Withheld | None = None) -> Report:
    """The usage in the store at ``path`` cut by ``by``, within days ``since`` to
    ``until`` of ``zone`` (local time when ``None``, which honours ``TZ``), of one
    ``source`` when given, without the scopes ``withheld`` names when given."""
    if by not in BY:
        raise ValueError(f"by {by!r}: expected one of {', '.join(BY)}")
    scopes, found = _read(path, utc_bounds(since, until, zone))
    if source is not None:
        scopes = {scope: pair for scope, pair in scopes.items() if pair[1] == source}
    if withheld is not None:
        for scope in withheld([(scope, d, s) for scope, (d, s) in scopes.items()]):
            scopes.pop(scope, None)
    machine = socket.gethostname()
    days: dict[int, str] = {}
    entries: dict[str, Entry] = {}
    totals = Tokens()
    found_prices: dict[str, Price | None] = {}
    for scope, session, model, bucket, fresh, output, creation, read, past in found:
        pair = scopes.get(scope)
        if pair is None:
            continue
        counts = (fresh, output, creation, read)
        above = _above(past)
        if by == "day":
            key = days.get(bucket)
            if key is None:
                key = days[bucket] = _day(bucket, zone)
        else:
            key = {"session": session, "project": pair[0], "model": model,
                   "machine": machine}[by]
        if model in found_prices:
            price = found_prices[model]
        else:
            price = found_prices[model] = prices.price_of(model)
        cost = None if price is None else prices.cost_at(price, counts, above)
        entry = entries.get(key)
        if entry is None:
            entry = entries[key] = Entry(key=key)
        entry.add(counts, cost)
        per_model = entry.models.get(model)
        if per_model is None:
            per_model = entry.models[model] = Tokens()
        per_model.add(counts, cost)
        totals.add(counts, cost)
    return Report(by, [entries[key] for key in sorted(entries)], totals)


def _above(text: str) -> tuple[int, int, int, int]:
    if text == "[0,0,0,0]":
        return (0, 0, 0, 0)
    found = msgspec.json.decode(text, type=tuple[int, int, int, int])
    return found


def _day(bucket: int, zone: ZoneInfo | None) -> str:
    moment = bucket * BUCKET_SECONDS
    if zone is None:
        return time.strftime("%Y-%m-%d", time.localtime(moment))
    return dt.datetime.fromtimestamp(moment, zone).date().isoformat()


def _read(path: Path, buckets: tuple[int, int]
          ) -> tuple[dict[int, tuple[str, str]], list[tuple[int, str, str, int, int, int, int,
                                                             int, str]]]:
    """The scopes and the aggregate's lines within ``buckets``, read in one snapshot;
    nothing when there is no store, or it was written before usage was kept."""
    if not path.exists():
        return {}, []
    try:
        db = schema.connect(path, readonly=True)
    except sqlite3.DatabaseError as exc:
        raise StoreError(describe_failure(path, exc, read_only=True)) from None
    try:
        db.execute("BEGIN")
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'usage'").fetchone() is None:
            return {}, []
        scopes = {scope: (directory, source) for scope, directory, source
                  in db.execute(schema.NEW_SCOPES, (0,))}
        return scopes, db.execute(schema.SELECT_USAGE, buckets).fetchall()
    except sqlite3.DatabaseError as exc:
        raise StoreError(describe_failure(path, exc, read_only=True)) from None
    finally:
        db.close()
