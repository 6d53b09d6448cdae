"""Entry-point names are checked before anything is imported: an empty name, a name
another entry point already took, or a built-in's, is reported by name and skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from hostcore import Host
from hostcore.errors import PluginLoadError
from hostcore.plugin.loader import BUILTIN_PLUGINS, entry_name_problem, reserved_names

# Writes a file when imported, so a test can tell it never was.
MARKING_PLUGIN = """
from pathlib import Path
Path({mark!r}).write_text("imported")
"""


def install(site: Path, dist: str, lines: list[tuple[str, str]]) -> dict[str, Path]:
    """Install ``dist`` with the entry-point lines ``(name, module source)`` as written,
    duplicates and empty names included; returns ``{module: mark file}``: each mark
    exists once its module was imported."""
    marks: dict[str, Path] = {}
    entries = ["[hostcore]"]
    for name, source in lines:
        module = f"fake_names_{uuid.uuid4().hex[:8]}"
        mark = site / f"{module}.imported"
        (site / f"{module}.py").write_text(
            MARKING_PLUGIN.format(mark=str(mark)) + source)
        entries.append(f"{name} = {module}")
        marks[module] = mark
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("\n".join(entries) + "\n")
    return marks


GOOD = """
from hostcore import hookimpl
from hostcore.plugin.registration import WorkerResult

class Hello:
    name = "hello"

    def run(self, host):
        return WorkerResult(counts={"greeted": 1})

@hookimpl
def hostcore_workers(host):
    return Hello()
"""


def hostcore(args: list[str], site: Path, root: Path, load: str,
             **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env.update(PYTHONPATH=str(site), HOSTCORE_ROOT=str(root), HOSTCORE_LOAD_PLUGINS=load,
               **extra)
    return subprocess.run([sys.executable, "-m", "hostcore", *args], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    return folder


def test_an_entry_point_with_an_empty_name_breaks_no_command(site, tmp_path):
    marks = install(site, "fake-empty", [("", GOOD), ("good", GOOD)])
    empty, good = marks.values()
    root = tmp_path / "root"
    listed = hostcore(["plugins", "--json"], site, root, "fake-empty")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    infos = [i for i in json.loads(listed.stdout) if i["distribution"] == "fake-empty"]
    by_status = {i["status"]: i for i in infos}
    assert set(by_status) == {"failed", "loaded"}
    assert by_status["failed"]["name"] == ""
    assert "fake-empty declares a hostcore entry point with an empty name" in \
        by_status["failed"]["error"]
    assert by_status["loaded"]["name"] == "good"
    ran = hostcore(["run", "--once"], site, root, "fake-empty")
    assert ran.returncode == 0, ran.stderr
    assert "empty name" in ran.stderr and "Traceback" not in ran.stderr
    assert not empty.exists() and good.exists()
    status = json.loads(hostcore(["status", "--json"], site, root, "fake-empty").stdout)
    assert status["last_tick"]["steps"]["hello"]["greeted"] == 1


def test_an_empty_entry_point_name_is_fatal_in_strict_mode(site, tmp_path):
    install(site, "fake-empty", [("  ", GOOD)])
    result = hostcore(["plugins"], site, tmp_path / "root", "fake-empty",
                      HOSTCORE_STRICT_PLUGINS="1")
    assert result.returncode == 1
    assert "empty name" in result.stderr and "fake-empty" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_duplicate_entry_point_name_is_skipped_before_import_naming_both(site, tmp_path):
    # Distributions are read in folder-name order: fake-a-twice before fake-b-also.
    first, second = install(site, "fake-a-twice", [("twice", GOOD), ("Twice", GOOD)]).values()
    (other,) = install(site, "fake-b-also", [("TWICE", GOOD)]).values()
    listed = hostcore(["plugins", "--json"], site, tmp_path / "root",
                      "fake-a-twice,fake-b-also")
    assert listed.returncode == 0, listed.stderr
    infos = [i for i in json.loads(listed.stdout) if i["name"].lower() == "twice"]
    assert sorted(i["status"] for i in infos) == ["failed", "failed", "loaded"]
    failures = sorted(i["error"] for i in infos if i["status"] == "failed")
    assert failures == [
        "PluginLoadError: entry point 'TWICE' of fake-b-also takes a plugin name "
        "fake-a-twice already uses",
        "PluginLoadError: entry point 'Twice' of fake-a-twice takes a plugin name "
        "fake-a-twice already uses",
    ]
    # Only the first was imported: neither skipped one ran any code.
    assert first.exists() and not second.exists() and not other.exists()


@pytest.mark.parametrize("name", ["hostcore", "export", "Evidence", "hostcore.export.plugin",
                                  "hostcore-plugin-core", "scaffold", "workitems"])
def test_an_entry_point_taking_a_built_in_name_is_skipped_naming_it(site, tmp_path, name):
    (mark,) = install(site, "fake-shadow", [(name, GOOD)]).values()
    listed = hostcore(["plugins", "--json"], site, tmp_path / "root", "fake-shadow")
    assert listed.returncode == 0, listed.stderr
    (info,) = [i for i in json.loads(listed.stdout) if i["distribution"] == "fake-shadow"]
    assert info["status"] == "failed"
    assert info["error"] == (f"PluginLoadError: entry point {name!r} of fake-shadow takes "
                             "the name of a hostcore built-in")
    assert not mark.exists()
    # The built-ins are all there, each listed once.
    builtins = [i["name"] for i in json.loads(listed.stdout) if i["status"] == "builtin"]
    assert len(builtins) == len(set(builtins)) == len(BUILTIN_PLUGINS)


def test_a_named_entry_point_that_collides_with_an_embedders_plugin_object_is_skipped(
        site, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    (mark,) = install(site, "fake-clash", [("mine", GOOD)]).values()

    class Mine:
        __name__ = "mine"

    host = Host(root=tmp_path / "root", plugins=[Mine()], load_entrypoints=True,
                env={"HOSTCORE_LOAD_PLUGINS": "fake-clash"})
    statuses = sorted((i.distribution or "-", i.status) for i in host.plugins.infos.values()
                      if i.name == "mine")
    assert statuses == [("-", "loaded"), ("fake-clash", "failed")]
    assert not mark.exists()
    with pytest.raises(PluginLoadError, match="'mine' of fake-clash"):
        Host(root=tmp_path / "strict", plugins=[Mine()], load_entrypoints=True,
             env={"HOSTCORE_LOAD_PLUGINS": "fake-clash", "HOSTCORE_STRICT_PLUGINS": "1"})


def test_reserved_names_are_the_project_the_built_ins_and_their_packages():
    assert {"hostcore", "export", "evidence", "workitems", "scaffold", "plugin",
            "hostcore-export-plugin"} <= reserved_names()
    assert "gh" not in reserved_names()
    assert entry_name_problem("gh", "hostcore-gh", {}) is None
    assert entry_name_problem("Export", "x", {}) is not None
    assert entry_name_problem("g_h", "x", {"g-h": "hostcore-gh"}) == (
        "entry point 'g_h' of x takes a plugin name hostcore-gh already uses")
