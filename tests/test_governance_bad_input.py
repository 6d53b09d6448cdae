"""Bad input at the gate: a path in no repository, a deleted target, a governing file
that cannot be read (unknown, never current), a target that is no regular file."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
Repo = helpers.Repo


@pytest.fixture
def repo(tmp_path):
    made = Repo(tmp_path)
    made.write("CLAUDE.md", "use tabs\n")
    made.write("src/a.py", "x = 1\n")
    return made


@pytest.mark.parametrize("command", [["stamp"], ["check"], ["approve"], ["check", "--json"]])
def test_a_path_in_no_repository_is_exit_2_naming_it(repo, tmp_path, command):
    stray = tmp_path / "loose" / "notes.txt"
    stray.parent.mkdir()
    stray.write_text("no repository here\n")
    done = repo.hostcore(*command, str(stray))
    assert done.returncode == 2
    assert str(stray) in done.stderr
    assert "no git repository" in done.stderr
    assert done.stdout == ""


def test_check_with_no_path_outside_any_repository_is_exit_2_naming_the_folder(repo, tmp_path):
    away = tmp_path / "elsewhere"
    away.mkdir()
    done = repo.hostcore("check", cwd=away)
    assert done.returncode == 2
    assert str(away) in done.stderr


def test_one_bad_path_records_nothing_and_names_every_bad_one(repo, tmp_path):
    done = repo.hostcore("stamp", "src/a.py", "src/missing.py", "src")
    assert done.returncode == 2
    assert "src/missing.py: no such file" in done.stderr
    assert f"{repo.top / 'src'}: not a regular file" in done.stderr
    assert repo.check("src/a.py") == (0, [{"path": str(repo.top / "src" / "a.py"),
                                           "status": "unstamped", "moved": []}])


def test_a_deleted_stamped_target_is_stale_with_target_moved(repo):
    repo.hostcore("stamp", "src/a.py")
    (repo.top / "src" / "a.py").unlink()
    assert repo.check() == (1, [{"path": str(repo.top / "src" / "a.py"), "status": "stale",
                                 "moved": ["target"]}])
    assert repo.check("src/a.py")[1][0]["moved"] == ["target"]
    forgot = repo.hostcore("stamp", "--forget", "--json", "src/a.py")
    assert json.loads(forgot.stdout) == {"forgotten": 1}
    assert repo.check() == (0, [])


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _dangling(path):
    path.unlink()
    path.symlink_to(path.parent / "nowhere.md")


def _folder(path):
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("make_unreadable", [_fifo, _dangling, _folder],
                         ids=["fifo", "dangling-symlink", "folder"])
def test_an_unreadable_governing_file_is_never_current(repo, make_unreadable):
    repo.hostcore("stamp", "src/a.py")
    make_unreadable(repo.top / "CLAUDE.md")
    expected = (1, [{"path": str(repo.top / "src" / "a.py"), "status": "stale",
                     "moved": ["context"]}])
    assert repo.check() == expected
    # An approval under governance that cannot be read vouches for none of it.
    repo.hostcore("approve", "src/a.py")
    assert repo.check() == expected


def test_a_file_stamped_while_its_governance_was_unreadable_stays_stale(repo):
    _fifo(repo.top / "CLAUDE.md")
    done = repo.hostcore("stamp", "--json", "src/a.py")
    assert done.returncode == 0
    assert json.loads(done.stdout)["targets"][0]["moved"] == ["context"]
    (repo.top / "CLAUDE.md").unlink()
    (repo.top / "CLAUDE.md").write_text("readable again\n")
    assert repo.check()[1][0] == {"path": str(repo.top / "src" / "a.py"), "status": "stale",
                                  "moved": ["context"]}
    repo.hostcore("approve", "src/a.py")  # readable now: an approval vouches for it
    assert repo.check()[0] == 0


def test_an_unreadable_sibling_governing_file_moves_nothing_here(repo):
    repo.write("docs/CLAUDE.md", "docs rules\n")
    repo.hostcore("stamp", "src/a.py")
    _fifo(repo.top / "docs" / "CLAUDE.md")
    assert repo.check()[0] == 0
