"""The usage fields a transcript source may put on an evidence row: counts, never content.

A row's payload carries them under ``usage`` (one API response's tokens: the
model and the four token kinds, and the digest that names the response so the
store counts it once however many lines repeat it) and under ``summary`` (a
session's own totals: durations and lines added and removed). Every value is
checked here before it goes on a row: an agent's transcript is input, and a
count of the wrong type, a negative one or one past :data:`MAX_COUNT` must be
counted and skipped, never summed into a total.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from hostcore.digests import blake2b

# The largest count accepted: far past any real response (a million-token context
# a request, for years), small enough that sums of millions of them fit SQLite's
# 64-bit integers.
MAX_COUNT = 10**12
# The longest model or tool name kept; anything longer is not a name.
MAX_NAME_CHARS = 128
# Above this many tokens of one kind in one response, some models bill a higher
# price (a long-context tier): the excess is kept apart so the cost can use it.
TIER_THRESHOLD = 200_000
# The token kinds, in the order rows, aggregates and reports list them.
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
               "cache_read_input_tokens")
# A response's excess past the tier when no kind passed it: the one tuple every such
# usage shares, so a sum can tell it by identity.
NONE_ABOVE = (0, 0, 0, 0)
# A count as a source's msgspec Struct declares it: msgspec then checks it while it
# decodes the line, in C (a bool, a float, a negative count or one past MAX_COUNT
# fails the decode, and the line counts as malformed), so a row with usage pays no
# Python call per count.
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]


# Names already found good: a transcript names a few models and tools over and over,
# on most of its lines. Kept to this many, far more than any user's.
_NAMES_KEPT = 4_096
_names: set[str] = set()


# The hasher of response digests, copied for each; the last parts digested and
# their digest.
_digest = blake2b(digest_size=12)
_last_digest: tuple[tuple[str, ...], str] = ((), "")


class BadUsage(ValueError):
    """A usage field that is no count or no name: the line is counted and skipped."""


def count(value: Any) -> int:
    """``value`` as a token count or duration, or :class:`BadUsage`. ``None`` is 0."""
    if value is None:
        return 0
    if type(value) is not int or value < 0 or value > MAX_COUNT:
        raise BadUsage("not a count")
    return value


def measure(value: Any) -> int:
    """``value`` as a duration or a line count, which some versions write with a
    fraction: rounded down, or :class:`BadUsage`."""
    if type(value) is float and 0 <= value <= MAX_COUNT:  # NaN and infinities fail here
        return int(value)
    return count(value)


def name(value: Any) -> str:
    """``value`` as a model or tool name, or :class:`BadUsage`: short printable text."""
    if type(value) is str and value in _names:
        return value
    if (type(value) is not str or not value or len(value) > MAX_NAME_CHARS
            or not value.isprintable() or not value.isascii()):
        raise BadUsage("not a name")
    if len(_names) >= _NAMES_KEPT:
        _names.clear()
    _names.add(value)
    return value


def response_digest(*parts: str) -> str:
    """The id of one API response on a row: a digest of the ids that name it, so the
    row carries no identifier of the provider's own."""
    global _last_digest
    # One response is written on a run of lines (one per content block), each asking
    # for the same digest: the last one is kept, a comparison instead of a hash.
    last = _last_digest
    if parts == last[0]:
        return last[1]
    # A copy of a hasher made once costs half what making one with its size does.
    found = _digest.copy()
    found.update("\0".join(parts).encode())
    digest = found.hexdigest()
    _last_digest = (parts, digest)  # one assignment: a reading thread sees either pair
    return digest


class Tokens(msgspec.Struct, gc=False, omit_defaults=True):
    """One response's ``usage`` on a row: its model, the four kinds (in
    :data:`TOKEN_KINDS` order), its digest and, when a kind passed
    :data:`TIER_THRESHOLD`, the excess of each kind (else left out of the JSON).

    A Struct, not a dict: it encodes to the same JSON, and the store's check of a
    batch's usage takes it as it is (a dict of this shape is checked field by
    field), so its counts must be checked before: a source's msgspec types do
    that as they decode (:data:`Count`)."""

    model: str
    response: str
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    above_tier: tuple[int, int, int, int] = NONE_ABOVE


def tokens(model: str, counts: tuple[int, int, int, int], response: str) -> Tokens:
    """The ``usage`` payload of one response: model, the four kinds (``counts``, in
    :data:`TOKEN_KINDS` order, checked by the caller: see :class:`Tokens`), its
    digest and the excess past the tier, if any."""
    fresh, output, creation, read = counts
    if (fresh > TIER_THRESHOLD or output > TIER_THRESHOLD or creation > TIER_THRESHOLD
            or read > TIER_THRESHOLD):
        above = (max(0, fresh - TIER_THRESHOLD), max(0, output - TIER_THRESHOLD),
                 max(0, creation - TIER_THRESHOLD), max(0, read - TIER_THRESHOLD))
        return Tokens(model, response, fresh, output, creation, read, above)
    return Tokens(model, response, fresh, output, creation, read)
