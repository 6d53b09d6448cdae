"""The console script keeps what its start-up loads out of the cyclic collector and
runs the command with the collector on; run_cli called by others leaves it alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Prints, once the command ran, whether the collector was on while it ran and how
# many objects were frozen (the status command's report is printed before). The
# probe is the host's status, which status --json calls on the console script's
# lean path (no click) and under click alike.
PROBE = """
import gc, json, sys
from hostcore.msgspec_import import import_msgspec
import_msgspec()
from hostcore.host import Host
seen = {}
status = Host.status
def probe(self, *args, **kwargs):
    seen.setdefault("enabled", gc.isenabled())
    seen.setdefault("frozen", gc.get_freeze_count())
    return status(self, *args, **kwargs)
Host.status = probe
"""


def run_probe(call: str, root: str) -> dict[str, object]:
    script = PROBE + call + "\nprint(json.dumps(seen))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, env={**env, "HOSTCORE_ROOT": root})
    printed, _, seen = out.stdout.rstrip("\n").rpartition("\n")
    assert json.loads(printed)["components"]  # the status report, complete
    return dict(json.loads(seen))


def test_the_console_script_runs_a_command_with_its_start_up_frozen_and_the_collector_on(
        tmp_path):
    call = ("from hostcore.__main__ import main\n"
            "try:\n    main(['status', '--json'])\nexcept SystemExit:\n    pass")
    seen = run_probe(call, str(tmp_path / "root"))
    assert seen["enabled"] is True
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 1000  # modules, plugins


def test_run_cli_called_by_an_embedder_leaves_the_collector_alone(tmp_path):
    call = ("from hostcore.cli.app import run_cli\n"
            "run_cli(['status', '--json'])")
    seen = run_probe(call, str(tmp_path / "root"))
    assert seen == {"enabled": True, "frozen": 0}
