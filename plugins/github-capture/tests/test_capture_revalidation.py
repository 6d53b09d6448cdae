"""Revalidation: triggers, the bounded resumable pass, the swap, conservative capture."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from hostcore_github_capture.sidecar import MAX_DERIVATION_AGE_SECONDS, UNITS, Sidecar
from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

REMOTE = "https://github.com/{}"


def rows(directory, source, *repos):
    return [(directory, source, REMOTE.format(r)) for r in repos]


@pytest.fixture(params=UNITS)
def unit(request):
    """Every guarantee holds whatever a pass reads: each test runs under both units."""
    return request.param


@pytest.fixture
def make(harness, unit):
    """A harness whose passes read ``unit``; ``budget`` sets the budget of either unit
    (the histories below give every row its own remote, so rows and tuples match)."""
    def build(budget=None, **options):
        if budget is not None:
            options.update(row_budget=budget, tuple_budget=budget)
        return harness(unit=unit, **options)

    return build


def derived(make, **options):
    """A harness whose inventory was derived from two directories and two sources."""
    h = make(**options)
    h.add("claude", rows("/w/shared", "claude", "octo/shared", "octo/both"))
    h.add("claude", rows("/w/secret", "claude", "octo/secret", "octo/both"))
    h.add("codex", rows("/w/shared", "codex", "octo/codex-only"))
    h.run_pass()
    h.events.clear()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret", "octo/codex-only"}
    return h


# -- the three ways a repository loses its evidence ----------------------------------


def test_marking_a_directory_local_only_retires_its_repositories_within_one_pass(make):
    h = derived(make)
    h.local_only("/w/secret")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/codex-only"}
    assert [c["retired"] for c in h.completed()] == [1]


def test_opting_a_source_out_retires_the_repositories_only_it_evidenced(make):
    h = derived(make)
    h.opt_out("codex")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret"}
    assert [c["retired"] for c in h.completed()] == [1]


def test_purging_the_only_evidence_of_a_repository_retires_it_within_one_pass(make):
    h = derived(make)
    h.host.store.purge(directory="/w/secret")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/codex-only"}
    assert h.started()[0]["trigger"] == "regressed"


# -- each trigger on its own ---------------------------------------------------------


def test_a_fingerprint_change_alone_starts_a_pass(make, unit):
    h = derived(make)
    h.local_only("/elsewhere")  # changes the fingerprint, withholds nothing here
    outcome = h.sidecar.tick()
    assert outcome.started == "fingerprint"
    assert h.started() == [{"trigger": "fingerprint", "unit": unit, "prior_inventory": 4,
                            "restarted": False}]
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret", "octo/codex-only"}


def test_a_purge_alone_starts_a_pass_as_a_regression(make):
    h = derived(make)
    fingerprint = h.state().policy_fingerprint
    h.host.store.purge(source_id="codex")
    assert h.sidecar.tick().started == "regressed"
    assert h.host.seam.export_policy_fingerprint() == fingerprint


def test_a_vanished_partition_alone_starts_a_pass_as_a_regression(make):
    h = derived(make)
    h.host.store.drop_partition("codex")
    assert h.sidecar.tick().started == "regressed"
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret"}


def test_a_purge_followed_by_appends_back_to_the_old_count_is_still_a_regression(make):
    h = derived(make)
    h.host.store.purge(directory="/w/secret")
    h.add("claude", rows("/w/shared", "claude", "octo/shared", "octo/shared"))
    assert h.sidecar.tick().started == "regressed"


def test_growth_alone_starts_no_pass(make):
    h = derived(make)
    h.add("claude", rows("/w/shared", "claude", "octo/new"))
    outcome = h.sidecar.tick()
    assert outcome.started is None and h.started() == []
    assert "octo/new" in h.inventory()


def test_the_age_backstop_alone_starts_a_pass_after_seven_days(make, clock):
    h = derived(make)
    clock.advance(MAX_DERIVATION_AGE_SECONDS)
    assert h.sidecar.tick().started is None
    clock.advance(1)
    assert h.sidecar.tick().started == "age"
    assert h.started()[0]["trigger"] == "age"
    assert h.state().derived_at == clock.now


def test_a_requested_pass_starts_without_any_trigger(make):
    h = derived(make)
    assert h.sidecar.tick(request=True).started == "requested"


@pytest.mark.parametrize("due", ["fingerprint", "regressed", "age"])
def test_a_requested_pass_is_labelled_with_the_trigger_that_was_due(make, clock, due):
    h = derived(make)
    if due == "fingerprint":
        h.local_only("/elsewhere")
    elif due == "regressed":
        h.host.store.purge(source_id="codex")
    else:
        clock.advance(MAX_DERIVATION_AGE_SECONDS + 1)
    assert h.sidecar.tick(request=True).started == due
    assert [s["trigger"] for s in h.started()] == [due]
    assert h.state().revalidation is None or h.state().revalidation.trigger == due


def test_an_old_sidecar_without_a_fingerprint_revalidates_once(make, clock):
    h = make()
    h.add("claude", rows("/w/a", "claude", "octo/kept"))
    h.add("claude", rows("/w/b", "claude", "octo/gone"))
    h.host.store.purge(directory="/w/b")
    version = str(h.host.store.partitions()["claude"])
    # What a sidecar written before revalidation existed holds: no fingerprint, no time.
    old = {"repos": ["octo/gone", "octo/kept"],
           "partitions": {"claude": {"version": version, "cursor": 2}},
           "written_by": "an older release"}
    h.sidecar.state.path.write_text(json.dumps(old))
    first = h.sidecar.tick()
    assert first.started == "fingerprint" and first.swapped
    assert h.inventory() == {"octo/kept"}
    for _ in range(3):
        clock.advance(3600)
        assert h.sidecar.tick().started is None
    assert len(h.started()) == 1


def test_a_pass_under_way_written_by_an_older_release_starts_over(make):
    h = make(budget=1)
    h.add("claude", rows("/w", "claude", "o/a", "o/b", "o/c"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    # The record as the release before noted heads and instances left it.
    record = msgspec.to_builtins(h.state().revalidation)
    for field in ("head", "store_instance", "position"):
        record.pop(field)
    record["snapshots"] = {}
    saved = msgspec.to_builtins(h.state())
    saved["revalidation"] = record
    h.sidecar.state.path.write_text(json.dumps(saved))
    assert h.sidecar.tick().started == "fingerprint"
    assert h.started()[-1]["restarted"] is True
    h.run_pass()
    assert h.inventory() == {"o/a", "o/b", "o/c"}


# -- the bounded pass ----------------------------------------------------------------


def test_a_pass_by_rows_reads_a_window_of_positions_a_tick_withheld_rows_included(harness):
    h = harness(unit="rows", row_budget=7)
    h.local_only("/w/secret")
    h.run_pass()  # initial derivation of an empty store
    spread = {"alpha": 11, "beta": 0, "gamma": 9}
    for partition, count in spread.items():
        h.add(partition, rows("/w", "claude", *[f"o/{partition}{i}" for i in range(count)]))
    h.add("beta", [("/w", "claude", "")])  # a row without a remote still takes a position
    h.add("alpha", rows("/w/secret", "claude", *[f"o/secret{i}" for i in range(10)]))
    head = h.host.store.head_position()
    assert head == 31
    h.local_only("/elsewhere")
    h.events.clear()
    confirmed_before: set[str] = set()
    ticks = 0
    while True:
        ticks += 1
        outcome = h.sidecar.tick()
        assert outcome.positions_read <= 7 and outcome.rows_read <= 7
        if not outcome.revalidating:
            break
        capturing = h.capturing()
        assert capturing == set(h.state().revalidation.confirmed)
        assert confirmed_before <= capturing
        confirmed_before = capturing
    assert ticks == math.ceil(head / 7)
    completed = h.completed()
    assert len(completed) == 1
    assert (completed[0]["positions_read"], completed[0]["rows_read"]) == (31, 21)
    assert completed[0]["slices"] == ticks
    slices = h.events.named("capture.revalidation_slice")
    assert len(slices) == ticks - 1
    assert all(s.attributes["positions_read"] == 7 and s.attributes["budget"] == 7
               for s in slices)
    assert slices[0].attributes["partitions_total"] == 3
    assert h.inventory() == {f"o/alpha{i}" for i in range(11)} | {
        f"o/gamma{i}" for i in range(9)}


def test_capture_sees_only_confirmed_keys_while_a_pass_is_under_way(make):
    h = make(budget=2)
    h.add("claude", rows("/w", "claude", "o/a", "o/b", "o/c", "o/d", "o/e"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    assert h.capturing() == {"o/a", "o/b"}
    assert h.inventory() == {"o/a", "o/b", "o/c", "o/d", "o/e"}
    h.sidecar.tick()
    assert h.capturing() == {"o/a", "o/b", "o/c", "o/d"}
    h.run_pass()
    assert h.capturing() == h.inventory() == {"o/a", "o/b", "o/c", "o/d", "o/e"}


def test_a_pass_resumes_mid_partition_after_a_restart_without_rereading(make, unit):
    h = make(budget=4)
    h.add("claude", rows("/w", "claude", *[f"o/r{i}" for i in range(10)]))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    record = h.state().revalidation
    assert record.position == 4 if unit == "rows" else record.cursors["claude"] == 4
    # A new process, configured for the other unit: the pass keeps its own.
    other = "tuples" if unit == "rows" else "rows"
    fresh = Sidecar(h.host.store, h.seam, StateFile(h.sidecar.state.path, SidecarState),
                    h.host.emit, clock=h.sidecar.clock, row_budget=4, tuple_budget=4,
                    unit=other)
    h.seam.rows = h.seam.tuples = 0
    assert fresh.tick().started is None
    assert fresh.tick().swapped
    assert (h.seam.rows, h.seam.tuples) == ((6, 0) if unit == "rows" else (0, 6))
    assert len(fresh.state.load().repos) == 10


def test_a_fingerprint_change_mid_pass_restarts_it_under_the_new_fingerprint(make):
    h = make(budget=3)
    h.add("claude", rows("/w/a", "claude", "o/a1", "o/a2", "o/a3"))
    h.add("claude", rows("/w/b", "claude", "o/b1", "o/b2", "o/b3"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    h.local_only("/w/b")
    outcome = h.sidecar.tick()
    assert outcome.started == "fingerprint"
    assert h.started()[-1]["restarted"] is True
    record = h.state().revalidation
    assert record.fingerprint == h.host.seam.export_policy_fingerprint()
    h.run_pass()
    assert h.inventory() == {"o/a1", "o/a2", "o/a3"}
    assert h.state().policy_fingerprint == h.host.seam.export_policy_fingerprint()


def test_a_fingerprint_change_back_readmits_on_the_same_pass(make):
    h = make(budget=2)
    h.add("claude", rows("/w/a", "claude", "o/a1", "o/a2"))
    h.add("claude", rows("/w/b", "claude", "o/b1", "o/b2"))
    h.run_pass()
    h.local_only("/w/b")
    h.sidecar.tick()
    assert h.capturing() == {"o/a1", "o/a2"}
    h.local_only("/w/b", local=False)  # moved back to full
    h.run_pass()
    assert h.inventory() == {"o/a1", "o/a2", "o/b1", "o/b2"}
    assert [c["retired"] for c in h.completed()] == [0, 0]


def test_a_retired_repository_returns_when_its_directory_moves_back_to_full(make):
    h = make()
    h.add("claude", rows("/w/a", "claude", "o/a"))
    h.add("claude", rows("/w/b", "claude", "o/b"))
    h.run_pass()
    h.local_only("/w/b")
    h.run_pass()
    assert h.inventory() == {"o/a"}
    h.local_only("/w/b", local=False)
    h.run_pass()
    assert h.inventory() == {"o/a", "o/b"}
    assert h.completed()[-1]["admitted"] == 1


def test_a_purge_of_a_partition_the_pass_already_read_restarts_it(make):
    h = make(budget=2)
    h.add("alpha", rows("/w/a", "claude", "o/a1", "o/a2", "o/a3", "o/a4"))
    h.add("beta", rows("/w/b", "claude", "o/b1", "o/b2"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    h.sidecar.tick()  # alpha read, beta not yet
    assert h.state().revalidation is not None
    h.host.store.purge(directory="/w/a")
    assert h.sidecar.tick().started == "regressed"
    assert h.started()[-1]["restarted"] is True
    h.run_pass()
    assert h.inventory() == {"o/b1", "o/b2"}


def test_a_partition_that_appears_mid_pass_is_read_by_the_tick_after_the_swap(make):
    h = make(budget=2)
    h.add("alpha", rows("/w", "claude", "o/a1", "o/a2", "o/a3"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    h.add("beta", rows("/w", "claude", "o/new"))
    while True:
        outcome = h.sidecar.tick()
        if outcome.swapped:
            break
    # The pass noted its partitions when it started; the new one is growth, next.
    assert outcome.pending
    assert h.inventory() == {"o/a1", "o/a2", "o/a3"}
    assert h.sidecar.tick().rows_read == 1
    assert h.inventory() == {"o/a1", "o/a2", "o/a3", "o/new"}
    assert not h.sidecar.pending()


def test_rows_appended_to_a_completed_partition_mid_pass_are_read_after_the_swap(make):
    h = make(budget=2)
    h.add("alpha", rows("/w", "claude", "o/a1"))
    h.add("beta", rows("/w", "claude", "o/b1", "o/b2", "o/b3"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()  # alpha complete
    h.add("alpha", rows("/w", "claude", "o/late"))
    h.run_pass()
    h.sidecar.tick()
    assert "o/late" in h.inventory()
    h.seam.reads = 0
    h.sidecar.tick()
    assert h.seam.reads == 0


def test_the_worker_reports_pending_while_a_pass_remains(make):
    h = make(budget=2)
    h.add("claude", rows("/w", "claude", "o/a", "o/b", "o/c"))
    reports = [h.host.tick() for _ in range(3)]
    assert [r.pending for r in reports] == [True, False, False]
    assert all(r.ok for r in reports)


def test_a_pass_record_survives_in_the_state_file_as_counts_and_keys_only(make):
    h = make(budget=1)
    h.add("claude", rows("/w/dir", "claude", "o/a", "o/b"))
    h.sidecar.tick()
    saved = msgspec.json.decode(h.sidecar.state.path.read_bytes())
    assert saved["revalidation"]["confirmed"] == ["o/a"]
    assert "/w/dir" not in h.sidecar.state.path.read_text()
    assert (h.sidecar.state.path.parent / SIDECAR_FILE).exists()


@pytest.mark.parametrize("trigger", ["fingerprint", "regressed", "age", "requested"])
def test_capture_sees_only_confirmed_keys_whatever_started_the_pass(make, clock, trigger):
    h = make(budget=2)
    h.add("claude", rows("/w", "claude", "o/a", "o/b", "o/c", "o/d", "o/e"))
    h.add("claude", rows("/w/purged", "claude", "o/a"))
    h.run_pass()
    if trigger == "fingerprint":
        h.local_only("/elsewhere")
    elif trigger == "regressed":
        h.host.store.purge(directory="/w/purged")
    elif trigger == "age":
        clock.advance(MAX_DERIVATION_AGE_SECONDS + 1)
    assert h.sidecar.tick(request=trigger == "requested").started == trigger
    assert h.capturing() == set(h.state().revalidation.confirmed) == {"o/a", "o/b"}
    assert len(h.inventory()) == 5
