"""``[plugins.governance]`` is the built-in gate's table: the host knows it is read.

The gate reads its table only when a check or a hook runs, after the host has
warned about the tables no plugin reads, so the name is known to the host up
front, as ``[plugins.export]`` is. A misspelt table still draws the warning.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

UNREAD = "is read by no installed plugin"


def configured(tmp_path: Path, toml: str) -> helpers.Repo:
    repo = helpers.Repo(tmp_path)
    repo.root.mkdir(parents=True)
    (repo.root / "hostcore.toml").write_text(toml)
    return repo


def test_a_governance_table_draws_no_unread_table_warning_on_status(tmp_path):
    repo = configured(tmp_path, "[plugins.governance]\ngate = false\n")
    done = repo.hostcore("status")
    assert done.returncode == 0, done.stderr
    assert UNREAD not in done.stderr


def test_a_governance_table_with_settings_draws_no_warning_on_check(tmp_path):
    repo = configured(tmp_path, '[plugins.governance]\ncontext_files = ["RULES.md"]\n')
    repo.write("RULES.md", "be brief\n")
    repo.write("a.py", "x = 1\n")
    assert repo.hostcore("stamp", "a.py").returncode == 0
    done = repo.hostcore("check")
    assert done.returncode == 0, done.stderr
    assert UNREAD not in done.stderr


def test_a_misspelt_governance_table_still_warns(tmp_path):
    repo = configured(tmp_path, "[plugins.governence]\ngate = false\n")
    done = repo.hostcore("status")
    assert "config table [plugins.governence] is read by no installed plugin" in done.stderr
