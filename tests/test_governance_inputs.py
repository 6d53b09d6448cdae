"""Governing inputs: third-party plugins through ``hostcore_governance_inputs``, the
configured terms, the ledger's decisions, and resolution once per folder."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.governance import TargetStatus, check_targets, stamp_targets
from hostcore.governance.gate import approve_targets
from hostcore.host import Host
from hostcore.plugin.markers import hookimpl
from hostcore.workitems.records import PortableRecord

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
Repo = helpers.Repo


class StyleInput:
    """Vouches, in ``terms``, for the repository's ``STYLE.md``; raises when told to,
    and counts the folders it was asked about."""

    def __init__(self) -> None:
        self.fail = False
        self.asked: list[Path] = []

    @hookimpl
    def hostcore_governance_inputs(self, target_dir, repo_root, host):
        self.asked.append(target_dir)
        if self.fail:
            raise RuntimeError("style service down")
        data = (repo_root / "STYLE.md").read_bytes()
        return {"terms": {"style": hashlib.sha256(data).hexdigest()}}


class Garbage:
    @hookimpl
    def hostcore_governance_inputs(self, target_dir, repo_root, host):
        return {"style": {"x": "y"}}  # no such component


@pytest.fixture
def repo(tmp_path):
    made = Repo(tmp_path)
    made.write("CLAUDE.md", "use tabs\n")
    made.write("STYLE.md", "snake_case\n")
    made.write("src/a.py", "x = 1\n")
    return made


def host_with(repo, *plugins, config=None):
    return Host(root=repo.root, plugins=list(plugins), load_entrypoints=False, env={},
                config=config)


def test_a_plugins_input_moves_its_own_component(repo):
    style = StyleInput()
    with host_with(repo, style) as host:
        assert stamp_targets(host, [repo.top / "src" / "a.py"]) == [
            TargetStatus(str(repo.top / "src" / "a.py"), "current", ())]
    repo.write("STYLE.md", "camelCase\n")
    with host_with(repo, style) as host:
        assert check_targets(host, repo=repo.top) == [
            TargetStatus(str(repo.top / "src" / "a.py"), "stale", ("terms",))]


def test_a_plugin_that_raises_is_isolated_and_what_it_vouched_for_is_unknown(repo):
    style = StyleInput()
    with host_with(repo, style) as host:
        stamp_targets(host, [repo.top / "src" / "a.py"])
    style.fail = True
    with host_with(repo, style) as host:
        statuses = check_targets(host, repo=repo.top)
        info = host.plugins.infos["StyleInput"]
    # The check answered; terms (the plugin's) is unknown, context (the built-in's) is not.
    assert statuses == [TargetStatus(str(repo.top / "src" / "a.py"), "stale", ("terms",))]
    assert info.status == "failed"
    assert "hostcore_governance_inputs raised" in (info.error or "")
    assert "style service down" in (info.error or "")


def test_a_plugin_returning_an_unknown_component_fails_alone(repo):
    with host_with(repo, Garbage()) as host:
        statuses = stamp_targets(host, [repo.top / "src" / "a.py"])
        failed = [i for i in host.plugins.infos.values() if i.status == "failed"]
    # It vouched for nothing in the basis, so every component is unknown: never current.
    assert statuses[0].status == "stale"
    assert statuses[0].moved == ("context", "terms", "decisions")
    assert len(failed) == 1 and "'style'" in (failed[0].error or "")


def test_inputs_are_resolved_once_per_folder(repo):
    targets = [repo.write(f"pkg{d}/m{f}.py", "pass\n") for d in range(4) for f in range(5)]
    style = StyleInput()
    # Asked about each folder on the targets' paths once: the root and the four folders.
    on_paths = sorted({repo.top, *(t.parent for t in targets)})
    with host_with(repo, style) as host:
        stamp_targets(host, targets)
        assert sorted(style.asked) == on_paths
        style.asked.clear()
        statuses = check_targets(host, repo=repo.top)
    assert len(statuses) == 20 and {s.status for s in statuses} == {"current"}
    assert sorted(style.asked) == on_paths


def test_configured_terms_files_govern_every_target(repo):
    config = {"plugins": {"governance": {"terms": ["docs/glossary.md"],
                                          "context_files": ["CONVENTIONS.md"]}}}
    repo.write("docs/glossary.md", "widget: a thing\n")
    with host_with(repo, config=config) as host:
        stamp_targets(host, [repo.top / "src" / "a.py"])
    repo.write("docs/glossary.md", "widget: another thing\n")
    with host_with(repo, config=config) as host:
        assert check_targets(host, repo=repo.top)[0].moved == ("terms",)
        approve_targets(host, [repo.top / "src" / "a.py"])
    repo.write("src/CONVENTIONS.md", "a configured instruction file name\n")
    with host_with(repo, config=config) as host:
        assert check_targets(host, repo=repo.top)[0].moved == ("context",)


def _decide(host, ref, verdict):
    host.ledger.write(PortableRecord(ref=ref, control={"verdict": verdict}))


def test_the_decisions_of_the_targets_own_work_item_govern_it(repo):
    with host_with(repo) as host:
        _decide(host, "octo/tool#1", "use the v2 API")
        stamp_targets(host, [repo.top / "src" / "a.py"], session="s", item="octo/tool#1")
        _decide(host, "octo/tool#2", "something else")  # another item's decision
        assert check_targets(host, repo=repo.top)[0].status == "current"
        _decide(host, "octo/tool#1", "use the v3 API")
        assert check_targets(host, repo=repo.top) == [
            TargetStatus(str(repo.top / "src" / "a.py"), "stale", ("decisions",))]


def test_a_target_with_no_known_work_item_is_not_governed_by_decisions(repo):
    with host_with(repo) as host:
        stamp_targets(host, [repo.top / "src" / "a.py"])
        _decide(host, "octo/tool#1", "a decision")
        assert check_targets(host, repo=repo.top)[0].status == "current"


RAISING_PLUGIN = """
from hostcore import hookimpl

@hookimpl
def hostcore_governance_inputs(target_dir, repo_root, host):
    raise RuntimeError("flaky input")
"""


def test_the_cli_names_a_failing_plugin_and_still_answers(repo, fake_site):
    repo.hostcore("stamp", "src/a.py")
    fake_site.add("hostcore-flaky", {"flaky": RAISING_PLUGIN})
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env.update(PYTHONPATH=str(fake_site.folder), HOSTCORE_LOAD_PLUGINS="hostcore-flaky")
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(repo.root),
                           "check", "--json"], cwd=repo.top, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "plugin 'flaky' failed in hostcore_governance_inputs" in done.stderr
    assert "flaky input" in done.stderr
    assert json.loads(done.stdout) == {"targets": [
        {"path": str(repo.top / "src" / "a.py"), "status": "stale",
         "moved": ["context", "terms", "decisions"]}]}
