"""A replaced store file is not growth: its instance id changed, so a pass starts over,
and the capture state forgets ETags that describe events the new file does not hold."""

from __future__ import annotations

import json

import msgspec
import pytest
import tenacity
from hostcore_gh.runner import GhRunner

REMOTE = "https://github.com/{}"


def rows(directory, *repos):
    return [(directory, "claude", REMOTE.format(r)) for r in repos]


def replace_store(h, harness, **options):
    """Close ``h``'s host, delete its store file as a user would (with the WAL and
    shared-memory files), and open the root again in a new host."""
    root = h.host.root
    h.host.close()
    for suffix in ("", "-wal", "-shm"):
        (root / f"store.sqlite3{suffix}").unlink(missing_ok=True)
    return harness(root=root, **options)


@pytest.mark.parametrize("unit", ["rows", "tuples"])
def test_a_store_replaced_by_a_bigger_one_is_a_trigger_not_growth(harness, unit):
    h = harness(unit=unit)
    h.add("claude", rows("/w/old", *[f"octo/old{i}" for i in range(5)]))
    h.run_pass()
    assert str(h.host.store.partitions()["claude"]) == "1:5"
    h = replace_store(h, harness, unit=unit)
    h.add("claude", rows("/w/new", *[f"octo/new{i}" for i in range(8)]))
    assert str(h.host.store.partitions()["claude"]) == "1:8"  # looks like growth from 1:5
    outcome = h.sidecar.tick()
    assert outcome.started == "replaced"
    assert h.capturing() <= {f"octo/new{i}" for i in range(8)}
    h.run_pass()
    # Every new row was read, and nothing of the old file is left in the inventory.
    assert h.inventory() == {f"octo/new{i}" for i in range(8)}
    assert h.state().store_instance == h.host.store.instance_id
    assert h.completed()[-1]["retired"] == 5
    assert h.sidecar.tick().started is None


def test_a_store_replaced_by_a_smaller_one_is_a_replacement_not_a_regression(harness):
    h = harness()
    h.add("claude", rows("/w/old", "octo/a", "octo/b", "octo/c"))
    h.run_pass()
    h = replace_store(h, harness)
    h.add("claude", rows("/w/new", "octo/z"))
    assert h.sidecar.tick().started == "replaced"
    assert h.inventory() == {"octo/z"}


def test_a_store_replaced_mid_pass_restarts_the_pass(harness):
    h = harness(unit="rows", row_budget=2)
    h.add("claude", rows("/w", *[f"octo/r{i}" for i in range(6)]))
    h.run_pass()
    h.local_only("/elsewhere")
    h.sidecar.tick()
    assert h.state().revalidation is not None
    h = replace_store(h, harness, unit="rows", row_budget=2)
    h.add("claude", rows("/w", "octo/fresh"))
    outcome = h.sidecar.tick()
    assert outcome.started == "replaced"
    assert h.started()[-1]["restarted"] is True
    h.run_pass()
    assert h.inventory() == {"octo/fresh"}


def test_a_sidecar_written_before_store_ids_were_kept_revalidates_once(harness, clock):
    h = harness()
    h.add("claude", rows("/w", "octo/a"))
    h.run_pass()
    saved = msgspec.to_builtins(h.state())
    del saved["store_instance"]
    h.sidecar.state.path.write_text(json.dumps(saved))
    assert h.sidecar.tick().started == "replaced"
    h.run_pass()
    clock.advance(3600)
    assert h.sidecar.tick().started is None
    assert h.inventory() == {"octo/a"}


def test_events_are_fetched_again_into_a_replaced_store(harness, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 5))
    runner = GhRunner(env=fake_gh.env, wait=tenacity.wait_none())
    h = harness(runner=runner)
    h.add("claude", rows("/w", "octo/a"))
    h.host.tick()
    clock.advance(61)
    h.host.tick()
    assert [c["status"] for c in fake_gh.calls()] == [200, 304]
    h = replace_store(h, harness, runner=runner)
    h.add("claude", rows("/w", "octo/a"))
    clock.advance(61)
    fake_gh.clear_calls()
    assert h.host.tick().ok
    # No If-None-Match: the ETag described events stored in the old file.
    assert [(c["status"], c["if_none_match"]) for c in fake_gh.calls()] == [(200, None)]
    stored = [key for _, key in h.host.seam.read_rows_since_sync("github_events", 0, ["key"])]
    assert sorted(stored, key=int) == ["1", "2", "3", "4", "5"]
    state = h.worker.capturer.state.load()
    assert state.store_instance == h.host.store.instance_id
    assert state.repos["octo/a"].etag is not None


def test_capture_state_written_before_store_ids_were_kept_keeps_its_etags(
        harness, fake_gh, make_events, clock):
    fake_gh.repo("octo/a", make_events("octo/a", 2))
    h = harness(runner=GhRunner(env=fake_gh.env, wait=tenacity.wait_none()))
    h.add("claude", rows("/w", "octo/a"))
    h.host.tick()
    capture_file = h.worker.capturer.state.path
    saved = json.loads(capture_file.read_text())
    del saved["store_instance"]
    capture_file.write_text(json.dumps(saved))
    clock.advance(61)
    fake_gh.clear_calls()
    h.host.tick()
    assert [c["status"] for c in fake_gh.calls()] == [304]
    assert h.worker.capturer.state.load().store_instance == h.host.store.instance_id
