"""Ordinary ticks extend the inventory from new permitted rows, and read nothing otherwise."""

from __future__ import annotations

import sqlite3

import pytest

REMOTE = "git@github.com:{}.git"


def rows(directory, source, *repos):
    return [(directory, source, REMOTE.format(r)) for r in repos]


def test_first_tick_derives_the_inventory_from_permitted_github_remotes(harness):
    h = harness()
    h.add("claude", rows("/w/a", "claude", "octo/one", "Octo/Two", "octo/one"))
    h.add("claude", [("/w/a", "claude", "https://gitlab.com/x/y"), ("/w/a", "claude", "")])
    outcome = h.sidecar.tick()
    assert outcome.started == "initial" and outcome.swapped
    assert h.inventory() == {"octo/one", "octo/two"}
    assert h.completed()[0]["unrecognised"] == 1
    assert h.state().policy_fingerprint == h.host.seam.export_policy_fingerprint()


def test_a_tick_with_nothing_changed_reads_zero_history_rows_and_writes_nothing(harness):
    h = harness()
    h.add("claude", rows("/w/a", "claude", "octo/one"))
    h.add("codex", rows("/w/b", "codex", "octo/two"))
    h.sidecar.tick()
    state_file = h.sidecar.state.path
    before = state_file.stat().st_mtime_ns
    h.seam.rows = h.seam.reads = 0
    for _ in range(3):
        outcome = h.sidecar.tick()
        assert not outcome.pending and outcome.started is None
    assert (h.seam.reads, h.seam.rows) == (0, 0)
    assert state_file.stat().st_mtime_ns == before


def test_a_grown_partition_is_read_from_its_cursor_and_the_others_stay_closed(harness):
    h = harness()
    h.add("claude", rows("/w/a", "claude", "octo/one", "octo/one", "octo/one"))
    h.add("codex", rows("/w/b", "codex", "octo/two"))
    h.sidecar.tick()
    h.seam.rows = h.seam.reads = 0
    h.add("codex", rows("/w/b", "codex", "octo/three", "octo/two"))
    outcome = h.sidecar.tick()
    assert (h.seam.reads, h.seam.rows, outcome.rows_read, outcome.added) == (1, 2, 2, 1)
    assert h.inventory() == {"octo/one", "octo/two", "octo/three"}
    assert h.events.named("capture.inventory_extended")[-1].attributes["added"] == 1


def test_a_new_partition_is_read_in_full_on_the_next_tick(harness):
    h = harness()
    h.add("claude", rows("/w/a", "claude", "octo/one"))
    h.sidecar.tick()
    h.add("gemini", rows("/w/c", "gemini", "octo/four", "octo/five"))
    assert h.sidecar.tick().rows_read == 2
    assert h.inventory() == {"octo/one", "octo/four", "octo/five"}


def test_withheld_rows_never_expand_the_inventory(harness):
    h = harness()
    h.local_only("/w/secret")
    h.opt_out("private-client")
    h.add("claude", rows("/w/a", "claude", "octo/one"))
    h.sidecar.tick()
    h.add("claude", rows("/w/secret/sub", "claude", "octo/hidden"))
    h.add("claude", rows("/w/a", "private-client", "octo/optedout"))
    h.add("claude", rows("/w/a", "claude", "octo/seen"))
    h.sidecar.tick()
    assert h.inventory() == {"octo/one", "octo/seen"}


def test_the_capture_partition_never_feeds_the_inventory(harness):
    h = harness()
    h.add("github_events", rows("", "github-capture", "octo/self"))
    h.add("claude", rows("/w/a", "claude", "octo/one"))
    h.sidecar.tick()
    h.add("github_events", rows("", "github-capture", "octo/self2"))
    h.seam.reads = 0
    h.sidecar.tick()
    assert h.inventory() == {"octo/one"}
    assert "github_events" not in h.state().partitions
    assert h.seam.reads == 0


def test_an_extension_stops_at_the_row_budget_and_reports_pending(harness):
    h = harness(row_budget=10)
    h.sidecar.tick()  # the initial derivation of an empty store
    h.add("claude", rows("/w/a", "claude", *[f"octo/r{i}" for i in range(25)]))
    outcomes = [h.sidecar.tick() for _ in range(3)]
    assert [o.rows_read for o in outcomes] == [10, 10, 5]
    assert [o.pending for o in outcomes] == [True, True, False]
    assert len(h.inventory()) == 25
    assert h.sidecar.tick().rows_read == 0


def examined(h, windows):
    """Rows of the store, permitted or not, that the row reads in ``windows`` spanned:
    what SQLite had to look at, counted straight from the file."""
    db = sqlite3.connect(f"{h.host.store.path.as_uri()}?mode=ro", uri=True)
    try:
        total = 0
        for partition, cursor, until in windows:
            total += db.execute(
                "SELECT COUNT(*) FROM evidence e JOIN partitions p ON p.id = e.part "
                "WHERE p.name = ? AND e.position > ? AND e.position <= ?",
                (partition, cursor, until if until is not None else 2**63 - 1)).fetchone()[0]
        return total
    finally:
        db.close()


@pytest.mark.parametrize("unit", ["rows", "tuples"])
def test_withheld_rows_count_against_the_budget_so_a_tick_examines_at_most_it(harness, unit):
    h = harness(row_budget=10, tuple_budget=10, unit=unit)
    h.local_only("/w/secret")
    h.sidecar.tick()  # the initial derivation of an empty store
    h.add("claude", rows("/w/secret", "claude", *[f"octo/hidden{i}" for i in range(60)]))
    h.add("codex", rows("/w/secret", "codex", *[f"octo/hidden{i}" for i in range(20)]))
    h.add("claude", rows("/w/open", "claude", "octo/one", "octo/two", "octo/three"))
    ticks = []
    while True:
        h.seam.windows.clear()
        outcome = h.sidecar.tick()
        ticks.append(outcome)
        assert examined(h, h.seam.windows) <= 10
        assert outcome.positions_read <= 10
        if not outcome.pending:
            break
    assert len(ticks) == 9  # 83 positions, 10 a tick
    assert sum(t.positions_read for t in ticks) == 83
    assert sum(t.rows_read for t in ticks) == 3
    assert h.inventory() == {"octo/one", "octo/two", "octo/three"}
    assert h.sidecar.tick().positions_read == 0


def test_a_small_growth_far_behind_other_partitions_is_read_in_one_tick(harness):
    h = harness(row_budget=10)
    h.add("claude", rows("/w/a", "claude", "octo/one"))
    h.sidecar.tick()
    # Other partitions take a thousand positions; claude grows by two rows after them.
    h.add("codex", rows("/w/b", "codex", *[f"octo/r{i}" for i in range(1000)]))
    h.add("github_events", rows("", "github-capture", *[f"octo/e{i}" for i in range(500)]))
    h.add("claude", rows("/w/a", "claude", "octo/two", "octo/three"))
    h.seam.windows.clear()
    h.sidecar.tick()
    claude = [w for w in h.seam.windows if w[0] == "claude"]
    assert len(claude) == 1 and examined(h, claude) == 2
    assert {"octo/two", "octo/three"} <= h.inventory()
