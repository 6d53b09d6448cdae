"""A telemetry sink that fails is one warning line naming it; its traceback only under -vv.

The sink here is the real JSONL sink whose events file is a folder, so every write
raises ``IsADirectoryError`` (whose message holds the path: the line at default
verbosity names the sink and the kind of failure, never the message).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.telemetry import Catalog, Event, EventSpec, Telemetry


@pytest.fixture
def broken_sink_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "plugins" / "jsonl-sink" / "events.jsonl").mkdir(parents=True)
    for folder in (root, root / "plugins", root / "plugins" / "jsonl-sink"):
        folder.chmod(0o700)
    return root


def run_once(root: Path, *verbosity: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *verbosity,
                           "run", "--once"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOSTCORE_LOAD_PLUGINS": "jsonl-sink"},
                          check=False)


def test_a_failing_sink_is_one_warning_line_at_default_verbosity(broken_sink_root):
    done = run_once(broken_sink_root)
    assert done.returncode == 0, done.stderr  # telemetry never fails the work it counts
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "telemetry sink" in line]
    assert warnings == ["hostcore: WARNING: telemetry sink 'jsonl' raised IsADirectoryError; "
                        "further failures are only counted"]
    assert str(broken_sink_root) not in done.stderr


def test_the_traceback_of_a_failing_sink_shows_under_vv_only(broken_sink_root):
    assert "Traceback" not in run_once(broken_sink_root, "-v").stderr
    debug = run_once(broken_sink_root, "-vv")
    assert debug.returncode == 0, debug.stderr
    assert "traceback of the failure of telemetry sink 'jsonl'" in debug.stderr
    assert "Traceback (most recent call last)" in debug.stderr
    assert "IsADirectoryError" in debug.stderr


class Fragile:
    name = "fragile"

    def receive(self, event: Event) -> None:
        raise OSError(28, "No space left on device", "/secret/path/events.jsonl")


def test_every_failure_is_counted_and_only_the_first_logged(caplog):
    catalog = Catalog()
    catalog.add(EventSpec("demo.done", {"n": int}), "test")
    telemetry = Telemetry(catalog, [Fragile()])
    with caplog.at_level(logging.DEBUG, logger="hostcore.telemetry"):
        for n in range(3):
            telemetry.emit("demo.done", n=n)
    assert telemetry.sink_failures == {"fragile": 3}
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    debugged = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert [r.getMessage() for r in warned] == [
        "telemetry sink 'fragile' raised OSError; further failures are only counted"]
    assert warned[0].exc_info is None
    assert len(debugged) == 1 and debugged[0].exc_info is not None
    assert all("/secret/path" not in r.getMessage() for r in caplog.records)
