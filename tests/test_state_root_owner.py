"""A state root, and each of its parents, that another user could write or swap is refused.

The checks follow PostgreSQL's on its data directory: the root belongs to the user
running hostcore (root included: running as root is no licence to use somebody
else's root) and only that user can write it; each parent folder belongs to that
user or to root and nobody else can write it, unless it is sticky (``/tmp``), where
nobody can rename what another user made. Every refusal is exit 2 and one line naming
the path and the fix, and nothing is created under the refused root.

Each case runs a real ``hostcore`` process. Foreign ownership is made with ``chown``
when the suite runs as root; otherwise a folder of the system, owned by root, is
another user's.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.errors import ConfigError
from hostcore.host import prepare_root

AS_ROOT = os.geteuid() == 0


def hostcore(*args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcore", *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "HOSTCORE_LOAD_PLUGINS": "", **(env or {})},
                          check=False)


def other_user() -> int:
    """A uid that is neither the running user nor root."""
    if AS_ROOT:
        return pwd.getpwnam("nobody").pw_uid
    return os.geteuid() + 1


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def foreign_root(tmp_path: Path) -> Path:
    """An existing folder, mode 0700, that belongs to another user."""
    if not AS_ROOT:
        return Path("/usr")  # root's, and hostcore would write into it if let
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, other_user(), -1)
    return root


def test_a_root_owned_by_another_user_is_refused_even_when_running_as_root(foreign_root):
    before = sorted(os.listdir(foreign_root))
    line = one_line(hostcore("--root", str(foreign_root), "run", "--once"))
    assert f"state root {foreign_root}: belongs to another user" in line
    assert f"uid {foreign_root.stat().st_uid}" in line
    assert "run hostcore as that user" in line  # the fix
    assert sorted(os.listdir(foreign_root)) == before


def test_a_read_only_command_refuses_a_foreign_root_too(foreign_root):
    # A report would read that user's hostcore.toml and policy: they are not yours.
    line = one_line(hostcore("--root", str(foreign_root), "status"))
    assert "belongs to another user" in line


def test_a_root_of_ones_own_in_a_parent_another_user_owns_is_refused(tmp_path):
    parent = tmp_path / "their-folder"
    parent.mkdir(mode=0o755)
    if AS_ROOT:
        os.chown(parent, other_user(), -1)
        done = hostcore("--root", str(parent / "state"), "run", "--once")
        line = one_line(done)
        assert not (parent / "state").exists(), "nothing is created in that folder"
    else:
        # Nobody else's folder can be made here: the same check, asked for another user.
        with pytest.raises(ConfigError) as refused:
            prepare_root(parent / "state", read_only=True, user=other_user())
        line = str(refused.value)
    assert "its parent folder" in line and "belongs to another user" in line
    assert "use a root whose parent folders are yours or root's" in line


def test_a_foreign_parent_is_refused_even_when_the_root_already_exists(tmp_path):
    parent = tmp_path / "swappable"
    parent.mkdir(mode=0o755)
    root = parent / "state"
    root.mkdir(mode=0o700)
    if not AS_ROOT:
        with pytest.raises(ConfigError, match=r"its parent folder .* belongs to another user"):
            prepare_root(root, read_only=False, user=other_user())
        return
    os.chown(parent, other_user(), -1)
    line = one_line(hostcore("--root", str(root), "run", "--once"))
    assert f"state root {root}: its parent folder {parent} belongs to another user" in line
    assert os.listdir(root) == []


@pytest.mark.parametrize("mode", [0o775, 0o777, 0o757])
def test_a_parent_others_can_write_is_refused_naming_it_and_the_fix(tmp_path, mode):
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(mode)
    line = one_line(hostcore("--root", str(parent / "state"), "run", "--once"))
    assert f"other users can write to its parent folder {parent}" in line
    assert f"`chmod go-w {parent}`" in line
    assert list(parent.iterdir()) == []


def test_a_parent_two_levels_up_is_checked_too(tmp_path):
    top = tmp_path / "top"
    (top / "middle").mkdir(parents=True)
    top.chmod(0o777)
    line = one_line(hostcore("--root", str(top / "middle" / "state"), "status"))
    assert f"parent folder {top} " in line


def test_a_sticky_world_writable_parent_is_accepted(tmp_path):
    parent = tmp_path / "like-tmp"
    parent.mkdir()
    parent.chmod(0o1777)
    root = parent / "state"
    done = hostcore("--root", str(root), "run", "--once")
    assert done.returncode == 0, done.stderr
    assert root.stat().st_uid == os.geteuid()
    assert oct(root.stat().st_mode & 0o777) == oct(0o700)


def test_a_group_writable_root_is_refused_with_chmod_700(tmp_path):
    root = tmp_path / "state"
    root.mkdir()
    root.chmod(0o770)
    line = one_line(hostcore("--root", str(root), "run", "--once"))
    assert f"state root {root}: other users can write to it" in line
    assert f"`chmod 700 {root}`" in line


def test_a_root_and_parents_of_ones_own_are_accepted(tmp_path):
    root = tmp_path / "mine" / "state"
    done = hostcore("--root", str(root), "run", "--once")
    assert done.returncode == 0, done.stderr
    assert root.is_dir()


def test_an_empty_hostcore_root_is_refused_naming_the_variable(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # HOME and XDG_DATA_HOME point at a fresh folder: were the variable read as unset,
    # the default root would appear there.
    done = hostcore("run", "--once", env={"HOSTCORE_ROOT": "", "HOME": str(home),
                                          "XDG_DATA_HOME": str(home / "data")})
    line = one_line(done)
    assert "$HOSTCORE_ROOT is set but empty" in line
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_root_option_is_refused_not_read_as_the_working_folder(tmp_path, given):
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", given, "run", "--once"],
                          capture_output=True, text=True, timeout=120, cwd=work,
                          stdin=subprocess.DEVNULL, check=False,
                          env={**os.environ, "HOSTCORE_LOAD_PLUGINS": ""})
    assert done.returncode == 2, done.stderr
    assert "Invalid value for '--root'" in done.stderr and "is empty" in done.stderr
    # Read as Path(""), the root would have been the folder the command ran in.
    assert list(work.iterdir()) == []
