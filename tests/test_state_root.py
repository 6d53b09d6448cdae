"""The state root as users meet it: owner-only modes, read-only commands, bad roots.

Every command here runs as a real ``hostcore`` process with every first-party and
contrib plugin installed, the way a user's machine has them.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

HOSTCORE = [sys.executable, "-m", "hostcore"]


def hostcore(*args: str, umask: int = 0o022, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOSTCORE, *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PATH": os.environ.get("PATH", ""), **(env or {})},
        preexec_fn=lambda: os.umask(umask), check=False)


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` with its mode, size and mtime, but SQLite's own
    ``-wal`` and ``-shm`` files, which any reader of a WAL database may create and
    the next writer removes (and the folders holding them, whose mtime moves)."""
    found = {}
    for path in [root, *root.rglob("*")]:
        if path.name.endswith(("-wal", "-shm")) or path.is_dir():
            continue
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


@pytest.fixture
def used_root(tmp_path: Path) -> Path:
    """A root after one tick that polled a task and a policy edit, written under a
    permissive umask: it holds the store, the ledger and its index, policy files."""
    root, tasks = tmp_path / "state", tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t1.toml").write_text('title = "a task"\nstate = "open"\n')
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.task-folder]\nfolders = {{ inbox = "{tasks}" }}\n')
    done = hostcore("--root", str(root), "run", "--once", umask=0)
    assert done.returncode in (0, 1), done.stderr
    done = hostcore("--root", str(root), "policy", "local-only", str(tmp_path), umask=0)
    assert done.returncode == 0, done.stderr
    return root


def test_every_state_folder_is_0700_and_every_file_0600_whatever_the_umask(used_root):
    modes = {name: stat.S_IMODE(mode) for name, (mode, _, _) in tree(used_root).items()}
    folders = {n: m for n, m in modes.items()
               if stat.S_ISDIR((used_root / n).lstat().st_mode)}
    files = {n: m for n, m in modes.items() if n not in folders and n != "hostcore.toml"}
    assert files, "a tick keeps state files"
    assert any(n.startswith("ledger/") for n in files), sorted(files)  # the poll's records
    assert {n: oct(m) for n, m in folders.items() if m != 0o700} == {}
    assert {n: oct(m) for n, m in files.items() if m != 0o600} == {}


@pytest.mark.parametrize("command", [("status",), ("status", "--json"), ("config",),
                                     ("plugins", "--json"), ("evidence",),
                                     ("policy", "show")])
def test_a_read_only_command_creates_nothing_in_a_new_root(tmp_path, command):
    root = tmp_path / "never-created"
    done = hostcore("--root", str(root), *command)
    assert done.returncode == 0, done.stderr
    assert not root.exists()


@pytest.mark.parametrize("command", [("status", "--json"), ("config",), ("plugins",),
                                     ("evidence", "--json"), ("policy", "show")])
def test_a_read_only_command_changes_nothing_in_a_used_root(used_root, command):
    before = tree(used_root)
    done = hostcore("--root", str(used_root), *command)
    assert done.returncode == 0, done.stderr
    assert tree(used_root) == before


@pytest.mark.parametrize("make_root, says", [
    (lambda tmp: tmp / "a-file" / "root", "cannot be"),
    (lambda tmp: tmp / "a-file", "is not a folder"),
    (lambda tmp: Path("/dev/null"), "is not a folder"),
])
def test_an_unusable_root_is_one_line_and_exit_2(tmp_path, make_root, says):
    (tmp_path / "a-file").write_text("not a folder")
    done = hostcore("--root", str(make_root(tmp_path)), "run", "--once")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr


def test_a_root_other_users_can_write_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    done = hostcore("--root", str(root), "run", "--once")
    assert done.returncode == 2
    assert "other users can write to it" in done.stderr
    assert list(root.iterdir()) == []


def test_status_in_a_new_process_shows_the_last_tick_and_its_age(used_root):
    done = hostcore("--root", str(used_root), "status")
    assert done.returncode == 0, done.stderr
    assert "last tick: ok, " in done.stdout and " ago, " in done.stdout
    assert any(line.split()[:2] == ["ingest", "ok"] for line in done.stdout.splitlines())


def test_plugins_fits_in_100_columns_and_lists_registrations_on_request(tmp_path):
    plain = hostcore("--root", str(tmp_path / "r"), "plugins")
    verbose = hostcore("--root", str(tmp_path / "r"), "plugins", "-v")
    assert plain.returncode == verbose.returncode == 0
    assert max(map(len, plain.stdout.splitlines())) <= 100
    assert max(map(len, verbose.stdout.splitlines())) <= 100
    assert "worker ingest" in verbose.stdout and "worker ingest" not in plain.stdout


def test_version_prints_one_format_both_ways():
    fast = hostcore("--version")
    slow = hostcore("--root", "/nonexistent", "--version", "status")
    assert fast.stdout == slow.stdout
    assert fast.stdout.startswith("hostcore ") and len(fast.stdout.split()) == 2
