"""The ref comparison: every status pair, moved(), current(), advance()."""

from __future__ import annotations

import msgspec
import pytest

from hostcore.export.ref import (
    COMPONENTS,
    GOVERNANCE,
    ComponentDiff,
    Divergence,
    Ref,
    Status,
    advance,
    compare,
)

# (local, remote, expected status) for the position: 0 on either side is "no claim".
POSITION_CASES = [
    (0, 0, Status.UNKNOWN),
    (0, 7, Status.UNKNOWN),
    (7, 0, Status.UNKNOWN),
    (7, 7, Status.CURRENT),
    (3, 7, Status.BEHIND),
    (9, 7, Status.AHEAD),
]

# (local, remote, expected status) for an identity: empty on either side is "no claim";
# two different hashes are moved, never behind or ahead.
IDENTITY_CASES = [
    ("", "", Status.UNKNOWN),
    ("", "b1", Status.UNKNOWN),
    ("a1", "", Status.UNKNOWN),
    ("a1", "a1", Status.CURRENT),
    ("a1", "b1", Status.MOVED),
    ("b1", "a1", Status.MOVED),
]


@pytest.mark.parametrize(("local", "remote", "expected"), POSITION_CASES)
def test_content_status_of_every_position_pair(local, remote, expected):
    diff = compare(Ref(content=local), Ref(content=remote)).content
    assert diff == ComponentDiff("content", expected, local, remote)


@pytest.mark.parametrize("component", GOVERNANCE)
@pytest.mark.parametrize(("local", "remote", "expected"), IDENTITY_CASES)
def test_identity_status_of_every_pair_in_each_component(component, local, remote, expected):
    divergence = compare(Ref(**{component: local}), Ref(**{component: remote}))
    assert getattr(divergence, component) == ComponentDiff(component, expected, local, remote)
    others = [getattr(divergence, c).status for c in COMPONENTS if c != component]
    assert others == [Status.UNKNOWN] * 3


def test_statuses_are_exactly_the_five_named_strings():
    assert [str(s) for s in Status] == ["unknown", "current", "behind", "ahead", "moved"]


def test_moved_never_lists_content_even_when_positions_differ():
    divergence = compare(Ref(content=1), Ref(content=99))
    assert divergence.content.status is Status.BEHIND
    assert divergence.moved() == []


def test_moved_lists_governance_in_context_terms_decisions_order():
    local = Ref(content=5, context="c1", terms="t1", decisions="d1")
    remote = Ref(content=9, context="c2", terms="t1", decisions="d2")
    assert compare(local, remote).moved() == ["context", "decisions"]
    everything = Ref(context="x", terms="y", decisions="z")
    assert compare(local, everything).moved() == ["context", "terms", "decisions"]


def test_current_ignores_unknown():
    assert compare(Ref(), Ref()).current()
    assert compare(Ref(content=3, context="c"), Ref(terms="t")).current()
    assert compare(Ref(content=3, context="c"), Ref(content=3, context="c")).current()


@pytest.mark.parametrize(
    "remote",
    [Ref(content=4), Ref(content=2), Ref(context="other"), Ref(decisions="other")],
)
def test_current_is_false_when_anything_is_behind_ahead_or_moved(remote):
    local = Ref(content=3, context="c", decisions="d")
    assert not compare(local, remote).current()


def test_divergence_has_one_diff_per_component_in_order():
    divergence = compare(Ref(), Ref())
    assert isinstance(divergence, Divergence)
    assert [d.component for d in divergence.diffs()] == ["content", "context", "terms", "decisions"]


@pytest.mark.parametrize(
    ("held", "offered", "expected"),
    [(0, 5, 5), (5, 9, 9), (9, 5, 9), (9, 9, 9), (9, 0, 9), (0, 0, 0)],
)
def test_advance_moves_the_position_only_forward(held, offered, expected):
    ref = Ref(content=held, context="c")
    moved = advance(ref, offered)
    assert moved.content == expected
    assert moved.context == "c"
    assert ref.content == held  # refs are values; advance returns a new one


def test_json_names_match_the_wire_form_and_zero_values_are_omitted():
    ref = Ref(content=12, context="c", decisions="d")
    assert msgspec.json.decode(msgspec.json.encode(ref)) == {
        "content": 12, "context": "c", "decisions": "d"
    }
    assert msgspec.json.encode(Ref()) == b"{}"
    assert msgspec.json.decode(b'{"terms":"t","extra":1}', type=Ref) == Ref(terms="t")
