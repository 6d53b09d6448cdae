"""Revalidation: triggers, the bounded resumable pass, the swap, conservative capture."""

from __future__ import annotations

import json

import msgspec
import pytest
from hostcore_github_capture.sidecar import MAX_DERIVATION_AGE_SECONDS, Sidecar
from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

REMOTE = "https://github.com/{}"


def rows(directory, source, *repos):
    return [(directory, source, REMOTE.format(r)) for r in repos]


def derived(harness, **options):
    """A harness whose inventory was derived from two directories and two sources."""
    h = harness(**options)
    h.add("claude", rows("/w/shared", "claude", "octo/shared", "octo/both"))
    h.add("claude", rows("/w/secret", "claude", "octo/secret", "octo/both"))
    h.add("codex", rows("/w/shared", "codex", "octo/codex-only"))
    h.run_pass()
    h.events.clear()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret", "octo/codex-only"}
    return h


# -- the three ways a repository loses its evidence ----------------------------------


def test_marking_a_directory_local_only_retires_its_repositories_within_one_pass(harness):
    h = derived(harness)
    h.local_only("/w/secret")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/codex-only"}
    assert [c["retired"] for c in h.completed()] == [1]


def test_opting_a_source_out_retires_the_repositories_only_it_evidenced(harness):
    h = derived(harness)
    h.opt_out("codex")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret"}
    assert [c["retired"] for c in h.completed()] == [1]


def test_purging_the_only_evidence_of_a_repository_retires_it_within_one_pass(harness):
    h = derived(harness)
    h.host.store.purge(directory="/w/secret")
    h.run_pass()
    assert h.inventory() == {"octo/shared", "octo/both", "octo/codex-only"}
    assert h.started()[0]["trigger"] == "regressed"


# -- each trigger on its own ---------------------------------------------------------


def test_a_fingerprint_change_alone_starts_a_pass(harness):
    h = derived(harness)
    h.local_only("/elsewhere")  # changes the fingerprint, withholds nothing here
    outcome = h.sidecar.tick()
    assert outcome.started == "fingerprint"
    assert h.started() == [{"trigger": "fingerprint", "unit": "rows", "prior_inventory": 4,
                            "restarted": False}]
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret", "octo/codex-only"}


def test_a_purge_alone_starts_a_pass_as_a_regression(harness):
    h = derived(harness)
    fingerprint = h.state().policy_fingerprint
    h.host.store.purge(source_id="codex")
    assert h.sidecar.tick().started == "regressed"
    assert h.host.seam.export_policy_fingerprint() == fingerprint


def test_a_vanished_partition_alone_starts_a_pass_as_a_regression(harness):
    h = derived(harness)
    h.host.store.drop_partition("codex")
    assert h.sidecar.tick().started == "regressed"
    assert h.inventory() == {"octo/shared", "octo/both", "octo/secret"}


def test_a_purge_followed_by_appends_back_to_the_old_count_is_still_a_regression(harness):
    h = derived(harness)
    h.host.store.purge(directory="/w/secret")
    h.add("claude", rows("/w/shared", "claude", "octo/shared", "octo/shared"))
    assert h.sidecar.tick().started == "regressed"


def test_growth_alone_starts_no_pass(harness):
    h = derived(harness)
    h.add("claude", rows("/w/shared", "claude", "octo/new"))
    outcome = h.sidecar.tick()
    assert outcome.started is None and h.started() == []
    assert "octo/new" in h.inventory()


def test_the_age_backstop_alone_starts_a_pass_after_seven_days(harness, clock):
    h = derived(harness)
    clock.advance(MAX_DERIVATION_AGE_SECONDS)
    assert h.sidecar.tick().started is None
    clock.advance(1)
    assert h.sidecar.tick().started == "age"
    assert h.started()[0]["trigger"] == "age"
    assert h.state().derived_at == clock.now


def test_a_requested_pass_starts_without_any_trigger(harness):
    h = derived(harness)
    assert h.sidecar.tick(request=True).started == "requested"


def test_an_old_sidecar_without_a_fingerprint_revalidates_once(harness, clock):
    h = harness()
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


# -- the bounded pass ----------------------------------------------------------------


def test_a_pass_under_a_row_budget_takes_the_expected_ticks_and_swaps_once(harness):
    h = harness(row_budget=7)
    h.run_pass()  # initial derivation of an empty store
    spread = {"alpha": 11, "beta": 0, "gamma": 9}
    total = 0
    for partition, count in spread.items():
        keys = [f"o/{partition}{i}" for i in range(count)]
        total += h.add(partition, rows("/w", "claude", *keys))
    h.add("beta", [("/w", "claude", "")])  # a row without a remote still counts as read
    total += 1
    h.sidecar.tick()  # extension: reads 7 of them
    h.local_only("/elsewhere")
    h.events.clear()
    confirmed_before: set[str] = set()
    ticks = 0
    while True:
        ticks += 1
        outcome = h.sidecar.tick()
        assert outcome.rows_read <= 7
        if not outcome.revalidating:
            break
        capturing = h.capturing()
        record = h.state().revalidation
        assert capturing == set(record.confirmed)
        assert confirmed_before <= capturing
        assert len(capturing) <= 7 * ticks  # only keys of rows read so far
        confirmed_before = capturing
    assert ticks == total // 7 + 1
    assert len(h.completed()) == 1
    assert h.completed()[0]["rows_read"] == total
    assert h.completed()[0]["slices"] == ticks
    slices = h.events.named("capture.revalidation_slice")
    assert len(slices) == ticks - 1
    assert all(s.attributes["rows_read"] == 7 and s.attributes["budget"] == 7 for s in slices)
    assert slices[0].attributes["partitions_total"] == 3
    assert len(h.inventory()) == total - 1


def test_capture_sees_only_confirmed_keys_while_a_pass_is_under_way(harness):
    h = harness(row_budget=2)
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


def test_a_pass_resumes_mid_partition_after_a_restart_without_rereading(harness):
    h = harness(row_budget=4)
    h.add("claude", rows("/w", "claude", *[f"o/r{i}" for i in range(10)]))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    assert h.state().revalidation.cursors["claude"] > 0
    # A new process: fresh state file object, fresh sidecar, same root.
    fresh = Sidecar(h.host.store, h.seam, StateFile(h.sidecar.state.path, SidecarState),
                    h.host.emit, clock=h.sidecar.clock, row_budget=4)
    h.seam.rows = 0
    assert fresh.tick().started is None
    assert fresh.tick().swapped
    assert h.seam.rows == 6
    assert len(fresh.state.load().repos) == 10


def test_a_fingerprint_change_mid_pass_restarts_it_under_the_new_fingerprint(harness):
    h = harness(row_budget=3)
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


def test_a_fingerprint_change_back_readmits_on_the_same_pass(harness):
    h = harness(row_budget=2)
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


def test_a_retired_repository_returns_when_its_directory_moves_back_to_full(harness):
    h = harness()
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


def test_a_purge_of_a_partition_the_pass_already_read_restarts_it(harness):
    h = harness(row_budget=3)
    h.add("alpha", rows("/w/a", "claude", "o/a1", "o/a2", "o/a3", "o/a4"))
    h.add("beta", rows("/w/b", "claude", "o/b1", "o/b2"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    h.sidecar.tick()  # alpha complete, beta under way
    h.host.store.purge(directory="/w/a")
    assert h.sidecar.tick().started == "regressed"
    h.run_pass()
    assert h.inventory() == {"o/b1", "o/b2"}


def test_a_partition_discovered_mid_pass_is_read_before_the_swap(harness):
    h = harness(row_budget=2)
    h.add("alpha", rows("/w", "claude", "o/a1", "o/a2", "o/a3"))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    h.add("beta", rows("/w", "claude", "o/new"))
    h.run_pass()
    assert h.inventory() == {"o/a1", "o/a2", "o/a3", "o/new"}


def test_rows_appended_to_a_completed_partition_mid_pass_are_read_after_the_swap(harness):
    h = harness(row_budget=2)
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


def test_the_worker_reports_pending_while_a_pass_remains(harness):
    h = harness(row_budget=2)
    h.add("claude", rows("/w", "claude", "o/a", "o/b", "o/c"))
    reports = [h.host.tick() for _ in range(3)]
    assert [r.pending for r in reports] == [True, False, False]
    assert all(r.ok for r in reports)


def test_a_pass_record_survives_in_the_state_file_as_counts_and_keys_only(harness):
    h = harness(row_budget=1)
    h.add("claude", rows("/w/dir", "claude", "o/a", "o/b"))
    h.sidecar.tick()
    saved = msgspec.json.decode(h.sidecar.state.path.read_bytes())
    assert saved["revalidation"]["confirmed"] == ["o/a"]
    assert "/w/dir" not in h.sidecar.state.path.read_text()
    assert (h.sidecar.state.path.parent / SIDECAR_FILE).exists()


@pytest.mark.parametrize("trigger", ["fingerprint", "regressed", "age", "requested"])
def test_capture_sees_only_confirmed_keys_whatever_started_the_pass(harness, clock, trigger):
    h = harness(row_budget=2)
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
