"""One budget counts what a revalidation tick examines, withheld or not, in both units:
150,000 withheld tuples cost a pass by tuples three ticks of at most 50,000 tuple ids
each, not one unbounded read that lets out 10."""

from __future__ import annotations

import pytest
from hostcore_github_capture.sidecar import (
    REVALIDATION_ROW_BUDGET,
    REVALIDATION_TUPLE_BUDGET,
    Sidecar,
)
from hostcore_github_capture.state import SidecarState, StateFile

from hostcore.evidence.rows import EvidenceRow

WITHHELD = 150_000
PERMITTED = 10


@pytest.fixture(scope="module")
def withheld_store(tmp_path_factory):
    """A host root whose store holds 150,000 withheld tuples (one row each, under a
    local-only folder) and then 10 permitted ones."""
    from hostcore.host import Host

    root = tmp_path_factory.mktemp("budget") / "root"
    host = Host(root=root, load_entrypoints=False)
    host.policy.input("class-list").set("/w/secret", "local-only")
    batch = 20_000
    for start in range(0, WITHHELD, batch):
        host.store.append([EvidenceRow(partition="claude", source_id="claude",
                                       directory="/w/secret", key=f"s{i}",
                                       git_remote=f"git@github.com:o/secret-{i}.git")
                           for i in range(start, start + batch)])
    host.store.append([EvidenceRow(partition="claude", source_id="claude",
                                   directory="/w/open", key=f"p{i}",
                                   git_remote=f"git@github.com:o/open-{i}.git")
                       for i in range(PERMITTED)])
    return root


def _sidecar(root, tmp_path, unit, events):
    from hostcore.host import Host

    host = Host(root=root, load_entrypoints=False)
    return Sidecar(host.store, host.seam, StateFile(tmp_path / "sidecar.json", SidecarState),
                   lambda name, **attributes: events.append((name, attributes)), unit=unit)


@pytest.mark.parametrize(("unit", "budget"), [("tuples", REVALIDATION_TUPLE_BUDGET),
                                              ("rows", REVALIDATION_ROW_BUDGET)])
def test_no_tick_examines_more_than_its_budget_of_withheld_history(withheld_store, tmp_path,
                                                                 unit, budget):
    events: list[tuple[str, dict[str, object]]] = []
    side = _sidecar(withheld_store, tmp_path, unit, events)
    ticks = []
    while True:
        outcome = side.tick()
        ticks.append(outcome)
        if outcome.swapped:
            break
    assert all(t.examined <= budget for t in ticks), [t.examined for t in ticks]
    # Every id (tuple id or position) up to the head was charged once over the pass,
    # withheld ones included; ids are not dense, so the head is at least the count.
    head = side.seam.tuple_head_sync() if unit == "tuples" else side.store.head_position()
    assert head >= WITHHELD + PERMITTED
    assert sum(t.examined for t in ticks) == head
    assert len(ticks) == -(-head // budget)
    assert sum(t.tuples_read + t.rows_read for t in ticks) == PERMITTED
    slices = [attributes for name, attributes in events
              if name == "capture.revalidation_slice"]
    assert [s["examined"] for s in slices] == [budget] * (len(ticks) - 1)
    assert all(s["budget"] == budget for s in slices)
    assert len(side.state.load().repos) == PERMITTED


def test_a_tick_of_withheld_tuples_lets_none_out_yet_charges_them(withheld_store, tmp_path):
    events: list[tuple[str, dict[str, object]]] = []
    first = _sidecar(withheld_store, tmp_path, "tuples", events).tick()
    assert (first.examined, first.tuples_read) == (REVALIDATION_TUPLE_BUDGET, 0)
    assert first.revalidating
