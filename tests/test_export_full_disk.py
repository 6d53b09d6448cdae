"""An export that fills the destination's disk says where, in one line.

A write to a segment the directory destination holds open fails with ``ENOSPC``
and no file name; the export used to print only ``No space left on device``,
which left the user to guess which of the root's disk and the destination's was
full. The export names where the destination writes (its ``key``).

A real ``hostcore export`` against a 1 MiB tmpfs, in a mount namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent('''
    import json, os, subprocess, sys
    from pathlib import Path
    from hostcore.evidence.store import EvidenceRow, Store

    base = Path(sys.argv[1])
    full, root = base / "full", base / "root"
    full.mkdir()
    root.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(full)], check=True)
    store = Store(root / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="s", directory="/w/a", key=str(n),
                              payload={"pad": "x" * 2000}) for n in range(2000)])
    store.close()
    # A back-off of 1 ms: `run --once` right after the failed export meets the disk,
    # not the back-off that failure set.
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\\npath = "{full}/out"\\n'
        '[plugins.export]\\nbackoff_seconds = 0.001\\nbackoff_max_seconds = 0.001\\n')
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "directory-destination"}
    results = {}
    for name, args in [("export", ["export", "-d", "directory"]),
                       ("run", ["run", "--once"])]:
        done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                              env=env, text=True, capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        results[name] = {"status": done.returncode, "stderr": done.stderr}
    print(json.dumps(results))
''')


def run_in_namespace(prefix: list[str], base: Path) -> dict[str, dict[str, object]]:
    script = base / "child.py"
    script.write_text(CHILD)
    done = subprocess.run([*prefix, sys.executable, str(script), str(base)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def test_a_full_destination_disk_is_one_line_naming_the_destination(tmp_path,
                                                                    mount_namespace):
    results = run_in_namespace(mount_namespace, tmp_path)
    destination = f"directory:{tmp_path / 'full' / 'out'}"
    export = results["export"]
    assert export["status"] == 1
    assert export["stderr"] == (f"hostcore: export to {destination}: "
                                "No space left on device\n")
    run = results["run"]
    assert run["status"] == 1
    assert f"No space left on device: 'export to {destination}'" in str(run["stderr"])
    assert "Traceback" not in str(run["stderr"])
