"""Two hosts, in two processes, pushing into one folder for a while.

Each host has its own store (its own origin) and changes its own policy as it
goes, so each keeps writing governance. Governance is kept per origin, so
neither ever finds the other's value where it expects its own: no run ends in a
conflict, and the folder holds every permitted row of each store exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.export.exporter import local_governance
from hostcore.host import Host

ROUNDS = 12

DRIVER = textwrap.dedent("""
    import json, sys
    import hostcore_directory_destination.plugin as directory_plugin
    from hostcore.cli.app import run_cli
    from hostcore.evidence.store import EvidenceRow
    from hostcore.host import Host

    root, rounds = sys.argv[1], int(sys.argv[2])
    codes = []
    for r in range(rounds):
        host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
        try:
            host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                          directory=f"/work/{r % 3}", payload={"r": r, "n": n})
                              for n in range(150))
            if r % 3 == 1:  # the policy moves: this host's context moves with it
                host.policy.input("class-list").set(f"/secret/{r}", "local-only")
                host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                              directory=f"/secret/{r}", payload={"r": r})
                                  for _ in range(20))
        finally:
            host.close()
        codes.append(run_cli(["export", "--json"]))
    print("EXIT CODES", json.dumps(codes))
""")


def make_root(path: Path, outbox: Path) -> Path:
    path.mkdir()
    (path / "hostcore.toml").write_text(f'[plugins.directory-destination]\npath = "{outbox}"\n')
    return path


def test_two_hosts_in_two_processes_share_a_folder_without_conflicts_or_lost_rows(tmp_path):
    outbox = tmp_path / "outbox"
    roots = [make_root(tmp_path / name, outbox) for name in ("host-a", "host-b")]
    drivers = [subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(root), str(ROUNDS)],
        env={**os.environ, "HOSTCORE_ROOT": str(root),
             "HOSTCORE_LOAD_PLUGINS": "hostcore-directory-destination"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for root in roots]
    outputs = [driver.communicate(timeout=300) for driver in drivers]
    for driver, (out, err) in zip(drivers, outputs, strict=True):
        assert driver.returncode == 0, err
        assert "moved at the destination" not in err  # no conflict, ever
        codes = json.loads(out.rsplit("EXIT CODES", 1)[1])
        assert codes == [0] * ROUNDS, err
    folder = DirectoryDestination(outbox)
    for root in roots:
        host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
        try:
            origin = host.store.instance_id
            rows = list(folder.read_rows("main", origin))
            expected = [p for (p,) in host.seam.read_rows_since_sync(None, 0, ())]
            assert [r.position for r in rows] == expected  # each once, none lost
            assert not any(r.directory.startswith("/secret/") for r in rows)
            published = json.loads((outbox / "main" / origin / "ref.json").read_text())
            assert published == local_governance(host).governance()
            status = host.status()["components"]["worker"]["export"]
            assert (status["rows_behind"], status["conflicts"]) == (0, "none")
        finally:
            host.close()
