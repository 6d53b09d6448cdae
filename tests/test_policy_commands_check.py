"""``hostcore policy``: the mutating commands check what they are told, take
``--force`` to mean it, report in ``--json``, and ``policy remove`` undoes an entry
(real subprocesses on a real root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hostcore.evidence.store import EvidenceRow, Store

SOURCES = "hostcore-claude-code,hostcore-codex"


def hostcore(root: Path, *args: str, plugins: str = SOURCES
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": plugins}
    env.pop("HOSTCORE_ROOT", None)
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def shown(root: Path) -> dict[str, object]:
    report: dict[str, object] = json.loads(hostcore(root, "policy", "show", "--json").stdout)
    return report


def test_a_folder_that_does_not_exist_is_refused_naming_it_and_the_fix(tmp_path):
    root, missing = tmp_path / "root", tmp_path / "no-such-project"
    done = hostcore(root, "policy", "local-only", str(missing))
    assert done.returncode == 2
    assert str(missing) in done.stderr and "--force" in done.stderr
    assert done.stdout == ""
    assert shown(root)["entries"] == []


def test_force_records_a_folder_that_does_not_exist(tmp_path):
    root, missing = tmp_path / "root", tmp_path / "no-such-project"
    done = hostcore(root, "policy", "local-only", "--force", str(missing), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"directory": str(missing), "class": "local-only", "changed": True,
                      "fingerprint": shown(root)["fingerprint"]}
    assert shown(root)["entries"] == [{"directory": str(missing), "class": "local-only"}]


def test_a_gone_folder_whose_rows_are_stored_needs_no_force(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    store = Store(root / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="codex", directory="/gone/project/sub",
                              key="k", payload={})])
    store.close()
    done = hostcore(root, "policy", "full", "/gone/project")
    assert done.returncode == 0, done.stderr
    assert "/gone/project: full; fingerprint " in done.stdout


def test_an_existing_folder_is_set_and_setting_it_again_reports_no_change(tmp_path):
    root, project = tmp_path / "root", tmp_path / "project"
    project.mkdir()
    first = json.loads(hostcore(root, "policy", "local-only", str(project), "--json").stdout)
    again = json.loads(hostcore(root, "policy", "local-only", str(project), "--json").stdout)
    assert (first["changed"], again["changed"]) == (True, False)
    assert first["fingerprint"] == again["fingerprint"] == shown(root)["fingerprint"]


def test_a_source_no_plugin_provides_is_refused_naming_it_and_the_known_ones(tmp_path):
    root = tmp_path / "root"
    done = hostcore(root, "policy", "opt-out", "cladue-code")
    assert done.returncode == 2
    assert "'cladue-code'" in done.stderr and "--force" in done.stderr
    assert "claude-code" in done.stderr.replace("'cladue-code'", "")  # the known ids
    assert shown(root)["opted_out"] == []


def test_an_installed_source_opts_out_and_force_takes_an_unknown_one(tmp_path):
    root = tmp_path / "root"
    done = hostcore(root, "policy", "opt-out", "codex", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["opted_out"] is True
    assert hostcore(root, "policy", "opt-out", "--force", "laptop-2").returncode == 0
    assert shown(root)["opted_out"] == ["codex", "laptop-2"]


def test_a_source_only_stored_rows_carry_is_known(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    store = Store(root / "store.sqlite3")
    store.append([EvidenceRow(partition="p", source_id="old-agent", directory="/w",
                              key="k", payload={})])
    store.close()
    assert hostcore(root, "policy", "opt-out", "old-agent", plugins="").returncode == 0


def test_opt_in_of_a_source_not_opted_out_says_so_in_json(tmp_path):
    done = hostcore(tmp_path / "root", "policy", "opt-in", "codex", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["source"], report["opted_out"], report["changed"]) == ("codex", False, False)


def test_remove_takes_back_a_class_entry_and_restores_the_fingerprint(tmp_path):
    root, kept, project = tmp_path / "root", tmp_path / "kept", tmp_path / "project"
    kept.mkdir()
    project.mkdir()
    assert hostcore(root, "policy", "full", str(kept)).returncode == 0
    before = shown(root)["fingerprint"]
    assert hostcore(root, "policy", "local-only", str(project)).returncode == 0
    done = hostcore(root, "policy", "remove", str(project), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["removed"] == [{"input": "class-list", "directory": str(project),
                                  "class": "local-only"}]
    assert report["fingerprint"] == before == shown(root)["fingerprint"]
    assert shown(root)["entries"] == [{"directory": str(kept), "class": "full"}]


def test_remove_takes_a_source_off_the_opt_out_list(tmp_path):
    root = tmp_path / "root"
    assert hostcore(root, "policy", "opt-out", "codex").returncode == 0
    done = hostcore(root, "policy", "remove", "codex")
    assert done.returncode == 0, done.stderr
    assert "codex: no longer opted out" in done.stdout
    assert shown(root)["opted_out"] == []


def test_remove_of_nothing_is_refused_naming_the_entry_and_where_to_look(tmp_path):
    root = tmp_path / "root"
    done = hostcore(root, "policy", "remove", "/never/set")
    assert done.returncode == 2
    assert "/never/set" in done.stderr and "hostcore policy show" in done.stderr


def test_quiet_drops_the_confirmation_but_not_the_refusal(tmp_path):
    root, project = tmp_path / "root", tmp_path / "project"
    project.mkdir()
    done = hostcore(root, "-q", "policy", "full", str(project))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    refused = hostcore(root, "-q", "policy", "full", str(tmp_path / "nope"))
    assert refused.returncode == 2 and "--force" in refused.stderr
