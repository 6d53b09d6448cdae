"""identity() and fold(): the only two hash definitions, pinned by known vectors."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcore.export.ref import Conflict, assert_component, fold, identity

# SHA-256 of no bytes: fold({}) claims "the set is empty".
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_identity_is_sha256_of_nul_joined_utf8_fields():
    expected = hashlib.sha256(b"owner/repo#1\x00closed\x00\xc3\xa9t\xc3\xa9").hexdigest()
    assert identity("owner/repo#1", "closed", "été") == expected


def test_identity_of_one_field_and_of_none():
    assert identity("abc") == hashlib.sha256(b"abc").hexdigest()
    assert identity() == EMPTY_SHA256


def test_identity_separates_fields():
    assert identity("ab", "c") != identity("a", "bc")
    assert identity("a", "") != identity("a")


def test_fold_of_nothing_is_the_digest_of_no_bytes_not_empty():
    assert fold({}) == EMPTY_SHA256
    assert fold({}) != ""


def test_fold_is_sha256_of_sorted_name_nul_hash_lf_lines():
    members = {"b": "22", "a": "11", "é": "33"}
    expected = hashlib.sha256(b"a\x0011\nb\x0022\n\xc3\xa9\x0033\n").hexdigest()
    assert fold(members) == expected


@given(st.dictionaries(st.text(), st.text(), max_size=8), st.randoms())
def test_fold_does_not_depend_on_insertion_order(members, rnd):
    items = list(members.items())
    rnd.shuffle(items)
    assert fold(dict(items)) == fold(members)


def test_fold_changes_when_a_member_changes_or_is_added():
    base = {"a": identity("x")}
    assert fold(base) != fold({"a": identity("y")})
    assert fold(base) != fold({**base, "b": identity("x")})


def test_empty_expectation_asserts_nothing():
    assert_component("context", "", "anything")
    assert_component("decisions", "", "")


def test_matching_expectation_passes():
    assert_component("terms", "t1", "t1")


def test_moved_component_raises_a_conflict_that_reads_as_the_instruction():
    with pytest.raises(Conflict) as caught:
        assert_component("context", "c-expected", "c-found")
    conflict = caught.value
    assert (conflict.component, conflict.expected, conflict.actual) == (
        "context", "c-expected", "c-found"
    )
    message = str(conflict)
    assert message.startswith("context moved")
    assert "expected c-expected" in message and "found c-found" in message
    assert "Retrying the same write cannot resolve this" in message


def test_asserting_the_position_is_refused():
    with pytest.raises(ValueError, match="not a governance component"):
        assert_component("content", "1", "2")
