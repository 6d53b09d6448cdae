"""The gate's faults in ``hostcore status``: counted by kind, never a path, and
reported once by the next tick (``run --once`` exits 1), as the agent hooks' are.

Through real ``hostcore`` processes (``check``, ``status``, ``run``, ``hook``) on a
real root, except the raising input plugin, which a host in this process carries.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcore.governance import check_targets, stamp_targets
from hostcore.host import Host
from hostcore.plugin.markers import hookimpl


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helpers = _load("governance_helpers")
agent_helpers = _load("agent_hook_helpers")


@pytest.fixture
def repo(tmp_path: Path) -> Any:
    made = helpers.Repo(tmp_path)
    made.write("CLAUDE.md", "use tabs\n")
    made.write("src/a.py", "x = 1\n")
    return made


def gate_status(repo: Any) -> tuple[dict[str, Any], str]:
    done = repo.hostcore("status", "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)["components"]["worker"]["governance"]
    return found, done.stdout


def test_a_clean_check_counts_no_fault(repo):
    assert repo.hostcore("stamp", "src/a.py").returncode == 0
    assert repo.check()[0] == 0
    found, _ = gate_status(repo)
    assert found["faults"] == {}
    assert found["last_fault_at"] is None


def test_an_unreadable_governing_file_is_stale_and_counted_without_a_path(repo):
    assert repo.hostcore("stamp", "src/a.py").returncode == 0
    (repo.top / "CLAUDE.md").unlink()
    os.mkfifo(repo.top / "CLAUDE.md")
    code, targets = repo.check()
    assert (code, targets[0]["status"]) == (1, "stale")  # unknown is never exit 0
    found, text = gate_status(repo)
    assert found["faults"] == {"input_unknown": 1}
    assert found["last_fault_at"]
    assert str(repo.top) not in text and "a.py" not in text and "CLAUDE.md" not in text


def test_a_fault_fails_the_next_tick_once_and_stays_counted(repo):
    repo.hostcore("stamp", "src/a.py")
    (repo.top / "CLAUDE.md").unlink()
    (repo.top / "CLAUDE.md").mkdir()  # a folder where an instruction file should be
    assert repo.check()[0] == 1
    first = repo.hostcore("run", "--once")
    assert first.returncode == 1
    assert "governance" in first.stderr and "input_unknown=1" in first.stderr
    assert str(repo.top) not in first.stderr
    again = repo.hostcore("run", "--once")
    assert again.returncode == 0, again.stderr
    assert gate_status(repo)[0]["faults"] == {"input_unknown": 1}


def test_a_read_only_check_with_no_stamp_store_creates_none(repo):
    assert repo.check("src/a.py") == (0, [{"path": str(repo.top / "src" / "a.py"),
                                           "status": "unstamped", "moved": []}])
    assert not (repo.root / "governance").exists()


class Raising:
    """An input plugin whose service is down."""

    @hookimpl
    def hostcore_governance_inputs(self, target_dir, repo_root, host):
        raise RuntimeError("glossary service down")


def test_an_input_plugin_that_raised_is_counted_once_per_command(repo):
    with Host(root=repo.root, load_entrypoints=False, env={}) as host:
        stamp_targets(host, [repo.top / "src" / "a.py"])
    with Host(root=repo.root, plugins=[Raising()], load_entrypoints=False, env={}) as host:
        statuses = check_targets(host, repo=repo.top)
        faults = host.status()["components"]["worker"]["governance"]["faults"]
    assert [s.status for s in statuses] == ["stale"]
    assert faults == {"input_failed": 1}


@pytest.fixture
def hooked_root(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = agent_helpers.agent_env(tmp_path)
    root = tmp_path / "hooked"
    root.mkdir(mode=0o700)
    done = agent_helpers.hostcore(root, env, "hooks", "install", "--agent", "claude-code")
    assert done.returncode == 0, done.stderr
    return root, env


def _written(folder: Path, name: str) -> dict[str, Any]:
    target = str(folder / name)
    return agent_helpers.claude_event(
        "PostToolUse", "s1", None, cwd=str(folder), tool_name="Write", tool_use_id="toolu_1",
        tool_input={"file_path": target, "content": "x = 1\n"},
        tool_response={"type": "create", "filePath": target})


def _governance_faults(root: Path, env: dict[str, str]) -> dict[str, int]:
    found: dict[str, int] = \
        agent_helpers.status(root, env)["components"]["worker"]["governance"]["faults"]
    return found


def test_files_a_hook_could_not_stamp_are_counted_in_the_gates_status(hooked_root, tmp_path):
    root, env = hooked_root
    repo = tmp_path / "git-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "a.py").write_text("x = 1\n")
    outside = tmp_path / "scratch"
    outside.mkdir()
    (outside / "notes.txt").write_text("n\n")
    for payload in (_written(repo, "a.py"), _written(outside, "notes.txt"),
                    _written(repo, "gone.py")):
        assert agent_helpers.hook(root, env, payload).returncode == 0
    assert _governance_faults(root, env) == {"stamp_outside_repository": 1,
                                             "stamp_target_gone": 1}


def test_a_gate_that_raised_in_a_hook_is_counted_in_the_gates_status(hooked_root, tmp_path):
    root, env = hooked_root
    repo = tmp_path / "git-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "a.py").write_text("x = 1\n")
    assert agent_helpers.hook(root, env, _written(repo, "a.py")).returncode == 0
    # A setting of the wrong type: the gate's inputs cannot be read, so stamping raises.
    (root / "hostcore.toml").write_text('[plugins.governance]\nterms = "GLOSSARY.md"\n')
    done = agent_helpers.hook(root, env, _written(repo, "a.py"))
    assert (done.returncode, done.stdout) == (0, b"")
    assert _governance_faults(root, env) == {"gate_failed": 1}
    assert agent_helpers.hook_faults(root, env) == {"gate_failed": 1}


def test_the_stamp_store_the_worker_looks_for_is_the_one_the_gate_keeps():
    from hostcore.governance.plugin import STAMP_STORE
    from hostcore.governance.stamps import FILE

    assert Path(STAMP_STORE) == FILE


def test_a_root_without_a_stamp_store_ticks_and_reports_no_faults_without_the_store(tmp_path):
    script = (
        "import sys\n"
        "from hostcore.host import Host\n"
        f"with Host(root={str(tmp_path / 'root')!r}, load_entrypoints=False, env={{}}) as h:\n"
        "    report = h.tick()\n"
        "    gate = h.status()['components']['worker']['governance']\n"
        "step = [s for s in report.steps if s.name == 'governance'][0]\n"
        "print(step.ok, step.skipped, gate, 'hostcore.governance.faults' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True).stdout
    assert out.split("\n")[-2] == (
        "True False {'available': True, 'faults': {}, 'last_fault_at': None} False")
    assert not (tmp_path / "root" / "governance").exists()
