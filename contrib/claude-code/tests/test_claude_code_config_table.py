"""The ``[plugins.claude-code]`` table under the spellings a user writes.

Plugin tables are matched the way distribution names are (PEP 503): ``claude_code``,
``Claude_Code`` and ``claude-code`` are one table. ``[plugins.claude_code]`` used to be
ignored in silence (while the warning about unread tables, matching by the same rule,
stayed quiet) and the real ``~/.claude`` was read instead of the folder configured.
Each case runs a real ``hostcore`` process with ``HOME`` holding a transcript of its
own, so reading the wrong folder shows as the wrong number of rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def transcript(home: Path, lines: int) -> None:
    path = home / ".claude" / "projects" / "-work" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/work",
        "sessionId": "s1", "version": "2.0.61", "gitBranch": "main", "type": "user",
        "message": {"role": "user", "content": "hello"}, "uuid": f"u{n}",
        "timestamp": "2025-07-28T22:54:41.466Z"}) + "\n" for n in range(lines)))


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A root, the configured Claude home (3 lines) and ``$HOME`` (1 line)."""
    root, configured, user_home = tmp_path / "root", tmp_path / "configured", tmp_path / "me"
    root.mkdir(mode=0o700)
    transcript(configured, 3)
    transcript(user_home, 1)
    return root, configured, user_home


def hostcore(root: Path, user_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(user_home), "HOSTCORE_LOAD_PLUGINS": "claude-code"}
    env.pop("CLAUDE_CONFIG_DIR", None)
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def rows_in(root: Path, user_home: Path) -> int:
    done = hostcore(root, user_home, "evidence", "--json")
    assert done.returncode == 0, done.stderr
    rows: int = json.loads(done.stdout)["rows"]
    return rows


@pytest.mark.parametrize("spelling", ["claude-code", "claude_code", "Claude_Code"])
def test_each_spelling_of_the_table_configures_the_plugin(homes, spelling):
    root, configured, user_home = homes
    (root / "hostcore.toml").write_text(f'[plugins.{spelling}]\nhome = "{configured}"\n')
    done = hostcore(root, user_home, "run", "--once")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    assert rows_in(root, user_home) == 3  # the configured folder, not $HOME's


def test_two_spellings_of_one_table_are_refused_naming_both(homes):
    root, configured, user_home = homes
    (root / "hostcore.toml").write_text(f'[plugins.claude-code]\nhome = "{configured}"\n'
                                        f'[plugins.claude_code]\nhome = "{user_home}"\n')
    done = hostcore(root, user_home, "run", "--once")
    assert done.returncode == 2
    assert "[plugins.claude-code] and [plugins.claude_code]" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / "store.sqlite3").exists()


def test_a_misspelt_table_is_named_in_a_warning(homes):
    root, configured, user_home = homes
    (root / "hostcore.toml").write_text(f'[plugins.claudecode]\nhome = "{configured}"\n')
    done = hostcore(root, user_home, "run", "--once")
    assert done.returncode == 0, done.stderr
    assert "config table [plugins.claudecode] is read by no installed plugin" in done.stderr
    assert rows_in(root, user_home) == 1  # the default folder, as the warning says
