"""A batch's usage, added to the store's aggregate by the append that inserts it.

Staging notes the batch's rows with usage (:func:`note`: each usage checked, each
time's bucket worked out from its text) and groups them by scope, session, model
and quarter-hour (:func:`tally`) before the store's write lock is taken. The
append calls :func:`add_tally` in its own transaction, so the aggregate and the
rows commit together or not at all: the store runs one upsert per bucket, not
one per row (see :data:`hostcore.evidence.schema.USAGE_DDL`). When it inserted not
every row (a key or a purge refused some), or staging could not sum them (a time
only SQLite reads), it sums those it inserted itself
(:func:`tally_in`). A batch whose scopes are new to the store is summed by their
names while staged, and given their ids once the append has made them.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import add
from typing import Any

import msgspec

from hostcore.evidence import schema
from hostcore.evidence.usage_fields import NONE_ABOVE, Tokens

__all__ = ["Noted", "Tally", "add_tally", "note", "tally", "tally_in"]

_encoder = msgspec.json.Encoder()
# Buckets per statement (as many as SQLite takes, if fewer).
_CHUNK_ROWS = 2_500
# Responses per statement: the remainder goes in statements of a power of two each,
# which the connection keeps compiled (see schema.insert_chunked).
_RESPONSE_CHUNK_ROWS = 256
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
# The types of a batch's usage when a source made every one with usage_fields.tokens.
_ONLY_TOKENS = {Tokens}


# (index, scope, session id, canonical ts, the payload's usage): a row of a batch with
# usage. The scope is its id, or its (directory, source id) when the store has not
# cached one yet.
Found = tuple[int, Any, str, str, Any]
# A row of a batch with usage as noted before its insert: (index in the batch, scope,
# session id, canonical ts, the usage checked (None: of another shape, not counted),
# its bucket worked out from the time's text (None: SQLite is asked)). Added to the
# aggregate, the index is the row's place among those inserted, the scope its id.
Noted = tuple[int, Any, str, str, Tokens | None, int | None]
# What the aggregate sums a response under: scope id (while staged, its name when
# the store had no id for it yet), session id, model, bucket.
Bucket = tuple[Any, str, str, int]


class Tally:
    """A batch's usage grouped for the aggregate, each response by the first of its
    rows, as if none were counted before (:func:`add_tally` finds out). A plain
    class: a NamedTuple's would cost every start that imports the store."""

    __slots__ = ("firsts", "groups")

    def __init__(self, firsts: dict[str, int], groups: dict[Bucket, list[Tokens]]) -> None:
        # response digest -> the index of its first row
        self.firsts = firsts
        # bucket -> the usage of each response counted in it
        self.groups = groups

    @property
    def totals(self) -> dict[Bucket, list[int]]:
        """Each bucket's sums: responses, the four kinds, above the tier (four)."""
        return _totals(self.groups)

    def rescoped(self, ids: Mapping[tuple[str, str], int]) -> Tally:
        """This tally with each scope staged by name, ``(directory, source id)``, given
        its id in ``ids`` (as the append's transaction made them).
        Staging reads the store's cache without its lock, so a scope may have been
        cached halfway through a batch: its rows staged by name and by id, whose
        responses are one bucket's here."""
        if not any(type(key[0]) is tuple for key in self.groups):
            return self  # only a partition was staged by name
        groups: dict[Bucket, list[Tokens]] = {}
        for key, group in self.groups.items():
            if type(key[0]) is tuple:
                key = (ids[key[0]], *key[1:])
            groups.setdefault(key, []).extend(group)
        return Tally(self.firsts, groups)


def note(found: list[Found], *, canonical: bool = False) -> list[Noted]:
    """``found`` checked and bucketed, ahead of the transaction that inserts the rows:
    called while the batch is staged, before the store's write lock is taken, so
    the append runs little but SQLite. ``canonical``: every time is known
    to be in the canonical form already (staging matched them all), so none is
    matched again."""
    usages = _checked([usage for _, _, _, _, usage in found])
    buckets = _text_buckets([ts for _, _, _, ts, _ in found], canonical=canonical)
    return [(index, scope, session, ts, usage, bucket)
            for (index, scope, session, ts, _), usage, bucket
            in zip(found, usages, buckets, strict=True)]


def tally(noted: Sequence[Noted], asked: Mapping[str, int | None] | None = None
          ) -> Tally | None:
    """Group ``noted`` (in index order) by bucket, each response by its first row; a
    usage of another shape (a source of its own) is not counted. A scope staged by
    name is grouped under its name (:meth:`Tally.rescoped` gives it its id). None
    when a row's time needs SQLite's reading and ``asked`` (SQLite's buckets of such
    times) is not given: staging then leaves it to the append."""
    firsts: dict[str, int] = {}
    groups: dict[Bucket, list[Tokens]] = {}
    # The loop runs for every response of a batch: grouped here, summed per bucket
    # once it is known which were counted before (_sums).
    for index, scope, session, ts, usage, bucket in noted:
        if usage is None:
            continue
        response = usage.response
        if response in firsts:
            continue
        if bucket is None:
            if asked is None:
                return None
            if (bucket := asked.get(ts)) is None:
                continue  # no time SQLite reads: in no bucket
        firsts[response] = index
        key = (scope, session, usage.model, bucket)
        group = groups.get(key)
        if group is None:
            groups[key] = [usage]
        else:
            group.append(usage)
    return Tally(firsts, groups)


def tally_in(db: sqlite3.Connection, noted: Sequence[Noted]) -> Tally:
    """:func:`tally` of inserted rows (their scopes ids), asking SQLite its reading of
    the times not worked out from their text (it rounds fractions to milliseconds,
    so 10:14:59.9999 is 10:15's bucket), as the delete trigger will read them."""
    ask = [found[3] for found in noted if found[5] is None and found[4] is not None]
    asked: dict[str, int | None] = (
        dict(db.execute(schema.BUCKETS, (_encoder.encode(ask),))) if ask else {})
    found = tally(noted, asked)
    assert found is not None  # every time not read from its text was asked
    return found


def add_tally(db: sqlite3.Connection, found: Tally, first: int) -> None:
    """Count the responses of ``found``, the tally of rows just inserted from position
    ``first`` on (a row of index i sits at ``first`` + i), that the store has not
    counted yet, each once, under the position of its first row."""
    firsts, groups = found.firsts, found.groups
    if not firsts:
        return
    # The insert's own look-up of each key says whether it was counted already, so
    # the common batch, every response new, asks nothing more of SQLite. Its
    # parameters, (digest, position) a response, are laid out by C loops.
    counted = schema.insert_chunked(db, schema.count_responses, list(chain.from_iterable(
        zip(firsts, map(add, firsts.values(), repeat(first)), strict=True))), 2,
        _RESPONSE_CHUNK_ROWS)
    if counted != len(firsts):
        # Some were counted by earlier rows, which all sit before this batch's.
        before = {response for (response,) in db.execute(
            schema.COUNTED_BEFORE, (_encoder.encode(list(firsts)), first))}
        groups = {key: kept for key, group in groups.items()
                  if (kept := [usage for usage in group if usage.response not in before])}
    schema.insert_chunked(db, schema.add_usage, [
        value for key, total in _totals(groups).items()
        for value in (*key, *total[:5], _above_text(total[5:]))], 10, _CHUNK_ROWS)


def _totals(groups: dict[Bucket, list[Tokens]]) -> dict[Bucket, list[int]]:
    return {key: _sums(group) for key, group in groups.items()}


def _sums(group: list[Tokens]) -> list[int]:
    """Responses, the four kinds and the excess past the tier (four) of a bucket."""
    # A loop of attribute reads, written out: twice as fast as sums of map and zip.
    fresh = output = creation = read = 0
    above: list[int] | None = None
    for usage in group:
        fresh += usage.input_tokens
        output += usage.output_tokens
        creation += usage.cache_creation_input_tokens
        read += usage.cache_read_input_tokens
        if usage.above_tier is not NONE_ABOVE:
            above = [a + b for a, b in zip(above or NONE_ABOVE, usage.above_tier, strict=True)]
    return [len(group), fresh, output, creation, read, *(above or NONE_ABOVE)]


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


def _checked(found: list[Any]) -> list[Tokens | None]:
    """Each of ``found`` as a :class:`Tokens`, or None when it is not one: the whole
    list in one call, and one by one only when some of it does not fit. A dict (a
    row's payload read back, a source's own) is checked field by field, a Tokens
    (what usage_fields.tokens made) taken as it is."""
    if set(map(type, found)) == _ONLY_TOKENS:
        return found  # the common batch, told by one set: convert would copy each
    try:
        return list(msgspec.convert(found, list[Tokens]))
    except msgspec.ValidationError:
        return [_one(usage) for usage in found]


def _one(usage: Any) -> Tokens | None:
    try:
        return msgspec.convert(usage, Tokens)
    except msgspec.ValidationError:
        return None


def _above_text(above: list[int]) -> str:
    return _encoder.encode(above).decode() if any(above) else "[0,0,0,0]"
