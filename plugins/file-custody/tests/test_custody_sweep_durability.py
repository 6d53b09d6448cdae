"""The sweep's durability model: every step is published by atomic rename before the
next one acts, so a process's death loses nothing, and nothing is fsynced (recovery
from power loss is not claimed): not the manifests, not the audit batch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from hostcore_file_custody import HeartbeatRegistry, StaleSweep

from hostcore.testing import require_tool

CHILD = Path(__file__).parent / "helpers" / "custody_kill_child.py"


SWEEP = ("import sys\n"
         "from hostcore_file_custody import HeartbeatRegistry, StaleSweep\n"
         "print('done', StaleSweep(HeartbeatRegistry(sys.argv[1])).run().deleted)\n")


def _strace(tmp_path: Path, *command: str) -> list[str]:
    require_tool("strace", "Debian: apt-get install strace")
    strace = shutil.which("strace")
    assert strace is not None
    trace = tmp_path / "trace"
    probe = subprocess.run([strace, "-f", "-y", "-o", str(trace), "-e",
                            "trace=fsync,fdatasync,rename,renameat,renameat2",
                            sys.executable, *command],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    return [probe.stdout.strip(), *trace.read_text().splitlines()]


def test_a_sweep_of_many_stale_heartbeats_fsyncs_nothing(tmp_path, kit):
    registry = HeartbeatRegistry(tmp_path / "registry").ensure()
    stale = 8
    for i in range(stale):
        kit.plant_stale(registry, f"ses-{i}")
    outcome, *calls = _strace(tmp_path, "-c", SWEEP, str(registry.root))
    assert outcome == f"done {stale}"
    fsyncs = [c for c in calls if re.search(r"\bf(data)?sync\(", c)]
    assert fsyncs == []
    # The audit records were still published, and sealed into one batch file.
    audit = [n for n in os.listdir(registry.audit_dir) if not n.startswith(".")]
    assert len(audit) == 1, audit
    pins = [c for c in calls if re.search(r'rename.*\.custody>, "op_\w+\.pin"', c)]
    assert len(pins) >= stale, calls


def test_no_intent_manifest_is_fsynced_and_each_is_published_before_its_pin(tmp_path):
    path = tmp_path / "cache" / "alpha.json"
    path.parent.mkdir()
    path.write_bytes(b"stale heartbeat")
    outcome, *calls = _strace(tmp_path, str(CHILD), "delete", str(path), "none", "yes")
    assert outcome == "done deleted"
    custody = [c for c in calls if "custody" in c]
    assert not any(re.search(r"\bf(data)?sync\(", c) for c in custody), custody
    manifest = next(i for i, c in enumerate(custody)
                    if re.search(r'rename.*"\.op_\w+\.json\.\w+\.tmp".*"op_\w+\.json"', c))
    pin = next(i for i, c in enumerate(custody)
               if re.search(r'rename.*"alpha\.json".*\.custody>, "op_\w+\.pin"', c))
    assert manifest < pin, custody


def test_a_sweep_still_deletes_every_stale_session_without_manifest_fsyncs(registry, kit):
    planted = [kit.plant_stale(registry, f"ses-{i}") for i in range(5)]
    report = StaleSweep(registry).run()
    assert report.deleted == len(planted)
    for session in planted:
        assert not registry.heartbeat_path(session.instance).exists()
    assert kit.private_entries(registry.heartbeat_path("x").parent) == []
