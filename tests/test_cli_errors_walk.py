"""Every way the hostile test made the CLI fail, walked through the real CLI: each
ends with the documented exit status (1: the state or a step failed, 2: bad usage
or configuration), one line naming the problem, no traceback, and nothing lost.

The full-disk and read-only-parent cases run in a mount namespace of their own,
on a tiny tmpfs; they are skipped, saying why, only where that is impossible.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hostcore.evidence.store import EvidenceRow, Store


def hostcore(args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
             plugins: str = "") -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HOSTCORE_LOAD_PLUGINS": plugins, **(env or {})}
    if "HOSTCORE_ROOT" not in (env or {}):
        full.pop("HOSTCORE_ROOT", None)
    return subprocess.run([sys.executable, "-m", "hostcore", *args], capture_output=True,
                          text=True, env=full, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)


def error_lines(stderr: str) -> list[str]:
    """The lines that report the failure (``hostcore: ...``, ``hostcore export: ...``
    or click's ``Error: ...``), not warnings logged on the way nor the usage lines
    click prints above its error."""
    return [line for line in stderr.splitlines()
            if re.match(r"(hostcore( [a-z-]+)*|Error): ", line)
            and not line.startswith("hostcore: WARNING")]


def check_one_clear_line(result: subprocess.CompletedProcess[str], status: int,
                         named: list[str]) -> None:
    assert result.returncode == status, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = error_lines(result.stderr)
    for fragment in named:
        assert fragment in line, f"{fragment!r} not in {line!r}"


# Files a failed command may still write: SQLite's own companions, locks, reports
# and caches that are re-derived (docs/state-files.md).
DISPOSABLE = re.compile(
    r"(-wal|-shm|\.lock|last-tick\.json|last-cycle\.json|index\.sqlite3|refs\.json)$")


def snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not DISPOSABLE.search(p.name)}


def kept(before: dict[str, bytes], after: dict[str, bytes]) -> bool:
    """Every file there before is there after, byte for byte."""
    return all(after.get(name) == data for name, data in before.items())


@dataclass
class Case:
    """One way to fail: ``prepare(tmp_path)`` returns the arguments (and environment)."""

    prepare: Callable[[Path], tuple[list[str], dict[str, str]]]
    status: int
    named: list[str]
    plugins: str = ""
    keeps: list[str] = field(default_factory=lambda: ["root"])  # folders left untouched


def seeded_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700, exist_ok=True)
    store = Store(root / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="s", directory="/w/a", key=str(n),
                              payload={"pad": "x" * 200}) for n in range(2000)])
    store.close()
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{tmp_path / "dest"}"\n')
    return root


def not_a_database(tmp_path: Path) -> Path:
    root = seeded_root(tmp_path)
    (root / "store.sqlite3").write_bytes(b"this is not a database" * 500)
    return root


def damaged(tmp_path: Path) -> Path:
    root = seeded_root(tmp_path)
    with (root / "store.sqlite3").open("r+b") as handle:
        handle.seek(4096 * 3)
        handle.write(bytes(range(256)) * 16 * 20)
    return root


def at(root_of: Callable[[Path], Path], *args: str) -> Callable[[Path], tuple[list[str],
                                                                                dict[str, str]]]:
    return lambda tmp_path: (["--root", str(root_of(tmp_path)), *args], {})


def env_root(make: Callable[[Path], str], *args: str) -> Callable[[Path], tuple[list[str],
                                                                                  dict[str, str]]]:
    return lambda tmp_path: ([*args], {"HOSTCORE_ROOT": make(tmp_path)})


def under_a_file(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("")
    return str(tmp_path / "a-file" / "root")


def with_config(text: str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        root = tmp_path / "root"
        root.mkdir(mode=0o700)
        (root / "hostcore.toml").write_text(text)
        return root

    return make


def empty_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def ledger_root(tmp_path: Path, broken: str) -> Path:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "a.toml").write_text('title = "A"\nstate = "open"\n')
    root = empty_root(tmp_path)
    (root / "hostcore.toml").write_text(
        f'[plugins.task-folder]\nfolders = {{ work = "{tasks}" }}\n')
    first = hostcore(["--root", str(root), "run", "--once"], cwd=tmp_path,
                     plugins="task-folder")
    assert first.returncode == 0, first.stderr
    if broken == "record":
        (record,) = (root / "ledger" / "portable").glob("*.json")
        record.unlink()
        record.mkdir()
    else:
        for path in (root / "ledger").glob("index.sqlite3*"):
            path.unlink()
        (root / "ledger" / "index.sqlite3").mkdir()
    return root


CASES: dict[str, Case] = {
    "evidence: not a database": Case(at(not_a_database, "evidence"), 1,
                                     ["store.sqlite3", "not an evidence store"]),
    "purge: not a database": Case(at(not_a_database, "purge", "--source", "s", "--yes"), 1,
                                  ["store.sqlite3", "not an evidence store"]),
    "export: not a database": Case(at(not_a_database, "export"), 1,
                                   ["store.sqlite3", "not an evidence store"],
                                   plugins="directory-destination"),
    "evidence: damaged": Case(at(damaged, "evidence"), 1, ["store.sqlite3", "malformed"]),
    "purge: damaged": Case(at(damaged, "purge", "--source", "s", "--yes"), 1,
                           ["store.sqlite3", "malformed"]),
    "export: damaged": Case(at(damaged, "export"), 1, ["store.sqlite3", "malformed"],
                            plugins="directory-destination"),
    "root under a file": Case(env_root(under_a_file, "run", "--once"), 2,
                              ["state root", "a-file"], keeps=[]),
    "root too long": Case(env_root(lambda t: str(t / ("x" * 300)), "run", "--once"), 2,
                          ["state root", "too long"], keeps=[]),
    "root is /dev/null": Case(env_root(lambda t: "/dev/null", "status"), 2,
                              ["state root /dev/null", "not a folder"], keeps=[]),
    "policy full empty": Case(at(empty_root, "policy", "full", ""), 2,
                              ["DIRECTORY", "empty"]),
    "policy local-only blank": Case(at(empty_root, "policy", "local-only", " "), 2,
                                    ["DIRECTORY", "empty"]),
    "policy full with a tab": Case(at(empty_root, "policy", "full", "/w/a\tb"), 2,
                                   ["DIRECTORY", "control character"]),
    "policy full with a newline": Case(at(empty_root, "policy", "full", "/w/a\nb"), 2,
                                       ["DIRECTORY", "control character"]),
    "policy opt-out empty": Case(at(empty_root, "policy", "opt-out", ""), 2,
                                 ["SOURCE", "empty"]),
    "policy opt-out with a tab": Case(at(empty_root, "policy", "opt-out", "co\tdex"), 2,
                                      ["SOURCE", "control character"]),
    "purge --dir empty": Case(at(seeded_root, "purge", "--dir", "", "--yes"), 2,
                              ["--dir", "empty"]),
    "purge --before year 10000": Case(at(seeded_root, "purge", "--before", "10000-01-01",
                                         "--yes"), 2, ["--before", "10000-01-01"]),
    "purge --before before year 1": Case(
        at(seeded_root, "purge", "--before", "0001-01-01T00:00:00+01:00", "--yes"), 2,
        ["--before", "years 0001 to 9999"]),
    "purge --before after 9999": Case(
        at(seeded_root, "purge", "--before", "9999-12-31T23:59:59-01:00", "--yes"), 2,
        ["--before"]),
    "interval inf": Case(at(with_config("[run]\ninterval_seconds = inf\n"), "run", "--once"),
                         2, ["run.interval_seconds"]),
    "interval 1e300": Case(at(with_config("[run]\ninterval_seconds = 1e300\n"), "run"), 2,
                           ["run.interval_seconds"]),
    "interval nan": Case(at(with_config("[run]\ninterval_seconds = nan\n"), "run"), 2,
                         ["run.interval_seconds"]),
    "ledger record is a folder": Case(at(lambda t: ledger_root(t, "record"), "run", "--once"),
                                      1, ["poll", "Is a directory", "portable/task_"],
                                      plugins="task-folder"),
    "ledger index is a folder": Case(at(lambda t: ledger_root(t, "index"), "run", "--once"),
                                     1, ["poll", "Is a directory", "index.sqlite3"],
                                     plugins="task-folder"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_failure_is_one_clear_line_with_the_documented_status(tmp_path, name):
    case = CASES[name]
    args, env = case.prepare(tmp_path)
    before = {keep: snapshot(tmp_path / keep) for keep in case.keeps}
    made_before = sorted(p.name for p in tmp_path.iterdir())
    result = hostcore(args, cwd=tmp_path, env=env, plugins=case.plugins)
    check_one_clear_line(result, case.status, case.named)
    for keep in case.keeps:
        assert kept(before[keep], snapshot(tmp_path / keep)), "nothing is lost or half-written"
    if not case.keeps:
        assert sorted(p.name for p in tmp_path.iterdir()) == made_before, "nothing is created"


# -- a full disk and a read-only parent, in a mount namespace ------------------------

NAMESPACE_SCRIPT = textwrap.dedent('''
    """Mount a tiny tmpfs, fill it, and run hostcore commands there (JSON results out)."""
    import json, os, subprocess, sys
    from pathlib import Path
    from hostcore.evidence.store import EvidenceRow, Store

    base = Path(sys.argv[1])
    full, readonly = base / "full", base / "readonly"
    full.mkdir(); readonly.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(full)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(readonly)],
                   check=True)
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": ""}

    def hostcore(*args):
        done = subprocess.run([sys.executable, "-m", "hostcore", *args], env=env, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        return {"status": done.returncode, "stderr": done.stderr, "stdout": done.stdout}

    root = full / "root"
    root.mkdir(mode=0o700)
    store = Store(root / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="s", directory="/w/a", key=str(n),
                              payload={"pad": "x" * 200}) for n in range(2000)])
    store.close()
    results = {"seed policy": hostcore("--root", str(root), "policy", "local-only", "/w/a")}
    classes = (root / "policy" / "classes.tsv").read_bytes()
    # Unbuffered: a buffered file would try its last block again on close, and fail.
    with open(full / "fill", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\\0" * 65536)
        except OSError:
            pass
    for name, args in [("policy full", ["policy", "full", "--force", "/w/b"]),
                       ("policy opt-out", ["policy", "opt-out", "--force", "codex"]),
                       ("policy show", ["policy", "show"]),
                       ("status", ["status"]),
                       ("evidence", ["evidence"]),
                       ("purge", ["purge", "--source", "s", "--yes"])]:
        results[name] = hostcore("--root", str(root), *args)
    results["read-only parent"] = hostcore("--root", str(readonly / "root"), "run", "--once")
    os.unlink(full / "fill")
    results["after"] = hostcore("--root", str(root), "evidence", "--json")
    results["classes kept"] = (root / "policy" / "classes.tsv").read_bytes() == classes
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def namespace_results(tmp_path_factory: pytest.TempPathFactory,
                      mount_namespace: list[str]) -> dict[str, object]:
    prefix = mount_namespace
    base = tmp_path_factory.mktemp("namespace")
    script = base / "namespace_child.py"
    script.write_text(NAMESPACE_SCRIPT)
    done = subprocess.run([*prefix, sys.executable, str(script), str(base)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


@pytest.mark.parametrize(("name", "status", "named"), [
    ("policy full", 1, ["classes.tsv", "No space left on device"]),
    ("policy opt-out", 1, ["sync-opt-out.json", "No space left on device"]),
    ("evidence", 1, ["store.sqlite3", "no space left on device"]),
    ("purge", 1, ["store.sqlite3", "no space left on device"]),
    ("read-only parent", 2, ["state root", "Read-only file system"]),
])
def test_a_full_disk_or_read_only_parent_is_one_clear_line(namespace_results, name, status,
                                                           named):
    found = namespace_results[name]
    assert isinstance(found, dict)
    check_one_clear_line(subprocess.CompletedProcess([], found["status"], found["stdout"],
                                                     found["stderr"]), status, named)


@pytest.mark.parametrize("name", ["policy show", "status"])
def test_reports_still_work_on_a_full_disk(namespace_results, name):
    found = namespace_results[name]
    assert isinstance(found, dict)
    assert found["status"] == 0, found["stderr"]
    assert "Traceback" not in found["stderr"]


def test_nothing_is_lost_on_a_full_disk(namespace_results):
    assert namespace_results["seed policy"]["status"] == 0  # type: ignore[index]
    after = namespace_results["after"]
    assert isinstance(after, dict) and after["status"] == 0, after
    assert json.loads(after["stdout"])["rows"] == 2000
    assert namespace_results["classes kept"] is True
