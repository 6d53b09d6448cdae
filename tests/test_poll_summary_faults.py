"""The last poll cycle's summary is a report: when its folder cannot be made, the
tick goes on, a warning names the error (never the path), and nothing is kept."""

from __future__ import annotations

import logging
import subprocess
import sys

from hostcore.workitems.summary import (
    LEDGER_DIR,
    PollSummary,
    keep_last_cycle,
    read_last_cycle,
)


def test_a_last_cycle_whose_folder_cannot_be_made_is_warned_about_and_not_kept(
        tmp_path, caplog):
    blocker = tmp_path / "ledger"
    blocker.write_text("a file where the folder goes\n")
    with caplog.at_level(logging.WARNING, logger="hostcore.workitems.summary"):
        keep_last_cycle(blocker / "below", [PollSummary(provider="gh", available=False)])
    assert [r.getMessage() for r in caplog.records] == [
        "could not keep the last poll cycle's summary: NotADirectoryError"]
    assert read_last_cycle(blocker / "below") == []
    assert blocker.read_text() == "a file where the folder goes\n"


def test_a_tick_whose_ledger_folder_is_a_file_still_succeeds_and_names_no_path(tmp_path):
    (tmp_path / LEDGER_DIR).write_text("in the way\n")
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(tmp_path), "run",
                           "--once"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "poll cycle" in line]
    assert warning == ["hostcore: WARNING: could not keep the last poll cycle's summary: "
                       "NotADirectoryError"]
    assert str(tmp_path) not in done.stderr
    assert (tmp_path / LEDGER_DIR).read_text() == "in the way\n"
