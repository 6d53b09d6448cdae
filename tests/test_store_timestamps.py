"""Row timestamps: the text fast path of ``canonical`` gives exactly what parsing gives,
and ``canonical_all`` what ``canonical`` gives stamp by stamp."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcore.timestamps import canonical, canonical_all, format_utc, parse

# The micro form (see hostcore.timestamps), written out here from its definition.
MICRO = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"


def by_parsing(text: str) -> str:
    moment = parse(text)
    return text if moment is None else format_utc(moment, "micro")


DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=1)
# UTC shapes with any digits, so impossible dates and times (2025-02-30, 24:00,
# :60, year 0000) are as likely as real ones.
UTC_SHAPED = st.builds(
    lambda y, mo, d, h, mi, s, frac: f"{y}-{mo}-{d}T{h}:{mi}:{s}{frac}Z",
    st.sampled_from(["0000", "0001", "0999", "1970", "2024", "2025", "2100", "9999"]),
    st.integers(0, 13).map(lambda n: f"{n:02d}"), st.integers(0, 32).map(lambda n: f"{n:02d}"),
    st.integers(0, 25).map(lambda n: f"{n:02d}"), st.integers(0, 61).map(lambda n: f"{n:02d}"),
    st.integers(0, 61).map(lambda n: f"{n:02d}"),
    st.one_of(st.just(""), st.text(st.sampled_from("0123456789"), min_size=1, max_size=8)
              .map(lambda f: f".{f}")))


@given(UTC_SHAPED)
def test_the_fast_path_agrees_with_parsing(text):
    assert canonical(text) == by_parsing(text)


@given(st.text(max_size=40))
def test_any_text_agrees_with_parsing(text):
    assert canonical(text) == by_parsing(text)


def test_the_forms_agents_write():
    assert canonical("2025-07-28T22:54:41.466Z") == "2025-07-28T22:54:41.466000Z"
    assert canonical("2025-07-28T22:54:41Z") == "2025-07-28T22:54:41.000000Z"
    assert canonical("2025-07-28T22:54:41.123456Z") == "2025-07-28T22:54:41.123456Z"
    assert canonical("2024-02-29T00:00:00Z") == "2024-02-29T00:00:00.000000Z"
    assert canonical("2025-02-29T00:00:00Z") == "2025-02-29T00:00:00Z"  # no such day: kept
    assert canonical("2025-07-29T00:54:41+02:00") == "2025-07-28T22:54:41.000000Z"
    assert canonical("9999-12-31T23:59:59-01:00") == "9999-12-31T23:59:59-01:00"


# Batches the way staging sees them: one length (one agent's stamps), mixed lengths,
# and now and then a stamp of another shape (an offset, an empty text, a newline).
COMMON_SHAPED = st.builds(
    lambda d, frac: f"2025-07-{d:02d}T22:54:41{frac}Z", st.integers(1, 31),
    st.sampled_from(["", ".4", ".46", ".466", ".4661", ".46612", ".466123"]))
STAMPS = st.one_of(COMMON_SHAPED, UTC_SHAPED, st.text(max_size=30),
                   st.just("2025-07-28T22:54:41.466+02:00"), st.just("2025-07-28T22:54:41Z\n"))


@given(st.lists(st.one_of(COMMON_SHAPED, STAMPS), max_size=30))
def test_a_batch_is_made_canonical_as_its_stamps_are(texts):
    stamps, every = canonical_all(texts)
    assert stamps == [canonical(text) for text in texts]
    # The usage aggregate buckets a batch by text alone when it says so: never wrongly.
    if every:
        assert all(re.fullmatch(MICRO, stamp) for stamp in stamps)


@given(st.sampled_from(["", ".4", ".466", ".466123"]), st.integers(1, 40))
def test_a_batch_of_one_length_is_padded_alike(frac, n):
    texts = [f"2025-07-{1 + i % 28:02d}T22:54:41{frac}Z" for i in range(n)]
    stamps, every = canonical_all(texts)
    assert stamps == [canonical(text) for text in texts]
    assert every and all(re.fullmatch(MICRO, stamp) for stamp in stamps)


def test_a_stamp_holding_a_newline_is_not_taken_for_two():
    two = "2025-07-28T22:54:41Z\n2025-07-28T22:54:41.4Z"
    assert canonical_all([two]) == ([canonical(two)], False) == ([two], False)
    assert canonical_all([two, "2025-07-28T22:54:41Z"]) == (
        [two, "2025-07-28T22:54:41.000000Z"], False)


def test_a_batch_that_is_not_text_raises_as_one_stamp_does():
    for bad in (None, 5):
        with pytest.raises(TypeError):
            canonical_all(["2025-07-28T22:54:41.466Z", bad])
        with pytest.raises(TypeError):
            canonical(bad)
