"""The staleness gate through real ``hostcore`` processes: stamp, check, approve.

A repository with ``CLAUDE.md`` at its top and another in a sibling folder: a
stamped file stays current when the sibling's file changes, goes stale naming
``context`` when its own governing file changes, is cleared by an approval and not
by a rejection; an unstamped file is only listed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
Repo = helpers.Repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo(tmp_path)
    made.write("CLAUDE.md", "use tabs\n")
    made.write("docs/CLAUDE.md", "write short sentences\n")
    made.write("src/a.py", "x = 1\n")
    return made


def status_of(targets: list[dict[str, object]], path: Path) -> tuple[object, object]:
    (found,) = [t for t in targets if t["path"] == str(path)]
    return found["status"], found["moved"]


def test_a_stamped_file_is_current_until_its_own_governing_file_changes(repo):
    a = repo.top / "src" / "a.py"
    assert repo.hostcore("stamp", "src/a.py").returncode == 0
    assert repo.check() == (0, [{"path": str(a), "status": "current", "moved": []}])

    repo.write("docs/CLAUDE.md", "write long sentences\n")  # a sibling folder's file
    assert repo.check() == (0, [{"path": str(a), "status": "current", "moved": []}])

    repo.write("CLAUDE.md", "use spaces\n")  # the file on a.py's own governance point
    assert repo.check() == (1, [{"path": str(a), "status": "stale", "moved": ["context"]}])


def test_check_json_is_exactly_the_targets_list(repo):
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    done = repo.hostcore("check", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"targets": [
        {"path": str(repo.top / "src" / "a.py"), "status": "stale", "moved": ["context"]}]}


def test_an_approval_clears_a_stale_file_without_rewriting_it(repo):
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    before = (repo.top / "src" / "a.py").read_bytes()
    assert repo.hostcore("approve", "src/a.py").returncode == 0
    assert repo.check() == (0, [{"path": str(repo.top / "src" / "a.py"),
                                 "status": "current", "moved": []}])
    assert (repo.top / "src" / "a.py").read_bytes() == before

    repo.write("CLAUDE.md", "use tabs again\n")  # the approval vouched for one version only
    assert repo.check()[0] == 1


def test_a_rejection_vouches_for_nothing_and_the_stamp_stands(repo):
    a = repo.top / "src" / "a.py"
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    assert repo.hostcore("approve", "--reject", "src/a.py").returncode == 0
    assert repo.check() == (1, [{"path": str(a), "status": "stale", "moved": ["context"]}])


def test_a_rejection_after_an_approval_takes_the_approval_back(repo):
    a = repo.top / "src" / "a.py"
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    repo.hostcore("approve", "src/a.py")
    assert repo.check()[0] == 0
    repo.hostcore("approve", "--reject", "src/a.py")
    assert repo.check() == (1, [{"path": str(a), "status": "stale", "moved": ["context"]}])


def test_restamping_after_a_change_makes_the_file_current_again(repo):
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    assert repo.check()[0] == 1
    repo.hostcore("stamp", "src/a.py")
    assert repo.check()[0] == 0


def test_an_unstamped_file_is_listed_and_never_fails_the_check(repo):
    repo.write("src/b.py", "y = 2\n")
    repo.hostcore("stamp", "src/a.py")
    code, targets = repo.check("src/a.py", "src/b.py")
    assert code == 0
    assert status_of(targets, repo.top / "src" / "b.py") == ("unstamped", [])
    assert status_of(targets, repo.top / "src" / "a.py") == ("current", [])


def test_an_override_between_the_target_and_the_root_governs_it(repo):
    repo.write("src/deep/CLAUDE.md", "this folder uses spaces\n")
    deep = repo.write("src/deep/c.py", "z = 3\n")
    repo.hostcore("stamp", "src/a.py", "src/deep/c.py")
    repo.write("src/deep/CLAUDE.md", "this folder uses tabs\n")
    code, targets = repo.check()
    assert code == 1
    assert status_of(targets, deep) == ("stale", ["context"])
    assert status_of(targets, repo.top / "src" / "a.py") == ("current", [])  # above it


def test_an_instruction_file_added_after_stamping_moves_context(repo):
    repo.hostcore("stamp", "src/a.py")
    repo.write("src/AGENTS.md", "new rules for src\n")
    assert repo.check()[1][0]["moved"] == ["context"]


def test_with_no_path_check_covers_the_working_folders_repository_only(repo, tmp_path):
    other = Repo(tmp_path / "second")
    other.root = repo.root  # one state root, two repositories
    other.write("CLAUDE.md", "other rules\n")
    other.write("b.py", "b = 1\n")
    repo.hostcore("stamp", "src/a.py")
    other.hostcore("stamp", "b.py")
    other.write("CLAUDE.md", "other rules, changed\n")
    assert repo.check(cwd=repo.top / "src") == (
        0, [{"path": str(repo.top / "src" / "a.py"), "status": "current", "moved": []}])
    assert other.check()[0] == 1


def test_session_limits_the_check_to_what_that_session_stamped(repo):
    repo.write("src/b.py", "y = 2\n")
    repo.hostcore("stamp", "--session", "s-1", "src/a.py")
    repo.hostcore("stamp", "--session", "s-2", "src/b.py")
    repo.write("CLAUDE.md", "use spaces\n")
    code, targets = repo.check("--session", "s-2")
    assert code == 1
    assert [t["path"] for t in targets] == [str(repo.top / "src" / "b.py")]


def test_text_output_is_a_table_that_fits_columns(repo):
    repo.hostcore("stamp", "src/a.py")
    repo.write("CLAUDE.md", "use spaces\n")
    env_columns = {"COLUMNS": "40"}
    done = subprocess.run(
        [sys.executable, "-m", "hostcore", "--root", str(repo.root), "check"],
        cwd=repo.top, capture_output=True, text=True, timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")},
             "HOSTCORE_LOAD_PLUGINS": "", **env_columns})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["status", "moved", "path"]
    assert lines[1].split()[:2] == ["stale", "context"]
    assert lines[1].endswith("a.py")
    assert all(len(line) <= 40 for line in lines)


def test_a_folder_given_to_check_stands_for_the_stamped_targets_below_it(repo):
    inside = repo.write("src/pkg/b.py", "y = 2\n")
    repo.write("srcs/c.py", "z = 3\n")  # a name that starts like src/, outside it
    repo.write("lib/d.py", "w = 4\n")
    repo.hostcore("stamp", "src/a.py", "src/pkg/b.py", "srcs/c.py", "lib/d.py")
    code, targets = repo.check("src")
    assert code == 0
    assert [t["path"] for t in targets] == [str(repo.top / "src" / "a.py"), str(inside)]
    # The repository's own top, named as `.`, stands for all of them.
    assert len(repo.check(".")[1]) == 4


def test_an_approval_alone_is_a_basis_and_a_rejection_alone_is_none(repo):
    b = repo.write("src/b.py", "y = 2\n")
    repo.hostcore("approve", "src/a.py")
    repo.hostcore("approve", "--reject", "src/b.py")
    code, targets = repo.check("src/a.py", "src/b.py")
    assert (code, status_of(targets, b)) == (0, ("unstamped", []))
    assert status_of(targets, repo.top / "src" / "a.py") == ("current", [])
    repo.write("CLAUDE.md", "use spaces\n")
    assert repo.check("src/a.py")[1][0]["moved"] == ["context"]
