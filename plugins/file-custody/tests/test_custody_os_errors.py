"""One bad file never stops the sweep, and the primitives keep their documented results
for OS errors: real mode-000 files (as an unprivileged user) and a real full disk."""

from __future__ import annotations

import errno


def test_primitives_return_their_documented_results_for_an_unreadable_file(faults):
    seen = faults.run_unprivileged("unreadable-file")
    assert seen["capture"] == f"FileAccessError {errno.EACCES}"
    assert seen["matches"] is False  # a match that cannot be checked is not a match
    outcome, reason = seen["delete"]
    assert outcome == "restored" and "Permission denied" in reason
    assert seen["back_at_path"] is True and seen["leftovers"] == []
    assert seen["delete_in_closed_folder"] == "kept-error"


def test_a_mode_000_heartbeat_or_pid_map_entry_is_skipped_counted_and_the_sweep_goes_on(faults):
    seen = faults.run_unprivileged("unreadable-sweep")
    assert seen["deleted"] == 2  # every instance sorted after the bad one is swept
    assert seen["remaining"] == ["a-bad.json"]
    assert seen["good_dependents_left"] == [False, False]
    assert seen["unhandled"] == 2  # the heartbeat and the orphan pid-map entry
    assert seen["status_unhandled"] == 2
    assert seen["pins"] == 0


def test_no_space_left_keeps_every_file_leaves_nothing_behind_and_never_fails_the_sweep(
    faults, tmp_path,
):
    seen = faults.run_in_mount_namespace("no-space", tmp_path)
    assert seen["first_deleted"] == 1
    outcome, reason = seen["delete"]
    assert outcome == "kept-error" and "No space left" in reason
    assert seen["leftovers_after_delete"] == []
    assert seen["sweep"]["deleted"] == 0 and seen["sweep"]["unhandled"] == 2
    assert seen["intact"] == [True, True]
    assert seen["leftovers_after_sweep"] == [0, 0, 0]
    assert seen["after_space_returns"] == 2
