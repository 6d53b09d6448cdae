"""Acceptance: third-party plugins installed with pip, as a user would, into a fresh venv.

The venv is created once for this module. hostcore and its dependencies come from the
environment running the tests (a ``.pth`` file adds its site folders to the venv, as
``--system-site-packages`` would for a system install); the plugins are built from
their own directories and installed into the venv by pip. hostcore is not touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

GOOD_PLUGIN = '''
from hostcore import EventSpec, hookimpl
from hostcore.plugin.registration import WorkerResult


class NoteCounter:
    name = "note-counter"

    def run(self, host):
        count = len(list(host.state_dir("acme-notes").glob("*.md")))
        host.emit("acme.notes_counted", notes=count)
        return WorkerResult(counts={"notes": count})


@hookimpl
def hostcore_events():
    return EventSpec("acme.notes_counted", {"notes": int}, "Notes seen in one tick.")


@hookimpl
def hostcore_workers(host):
    return NoteCounter()
'''

BROKEN_PLUGIN = '''
raise ImportError("acme-broken needs libfrobnicate, which is not installed")
'''


class Venv:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.python = folder / "bin" / "python"

    def pip_install(self, project: Path) -> None:
        # --no-deps: hostcore is already importable; --no-build-isolation: build with
        # the hatchling at hand instead of downloading one.
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.python), "install", "-q",
             "--no-deps", "--no-build-isolation", "--disable-pip-version-check", str(project)],
            check=True, capture_output=True, text=True, timeout=300,
        )

    def hostcore(self, root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
        return subprocess.run([str(self.python), "-m", "hostcore", "--root", str(root), *args],
                              env={**clean, **env}, capture_output=True, text=True, timeout=120)

    def plugins(self, root: Path, **env: str) -> dict[str, dict]:
        result = self.hostcore(root, "plugins", "--json", **env)
        assert result.returncode == 0, result.stderr
        return {p["name"]: p for p in json.loads(result.stdout)}


@pytest.fixture(scope="module")
def venv(tmp_path_factory, outer_venv) -> Venv:
    folder = tmp_path_factory.mktemp("acceptance") / "venv"
    outer_venv(folder)
    return Venv(folder)


@pytest.fixture(scope="module")
def good_installed(venv, tmp_path_factory, plugin_project) -> Venv:
    src = tmp_path_factory.mktemp("src")
    venv.pip_install(plugin_project(src / "acme-notes", "acme-notes", GOOD_PLUGIN,
                                    version="2.3.4"))
    return venv


@pytest.fixture(scope="module")
def broken_installed(good_installed, tmp_path_factory, plugin_project) -> Venv:
    src = tmp_path_factory.mktemp("src-broken")
    good_installed.pip_install(plugin_project(src / "acme-broken", "acme-broken",
                                              BROKEN_PLUGIN, version="2.3.4"))
    return good_installed


def test_the_venv_does_not_have_the_plugin_before_pip_installs_it(venv, tmp_path):
    assert "acme-notes" not in venv.plugins(tmp_path)


def test_pip_installed_plugin_is_listed_as_loaded(good_installed, tmp_path):
    where = subprocess.run([str(good_installed.python), "-c",
                            "import acme_notes; print(acme_notes.__file__)"],
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(good_installed.folder)), "installed into the venv itself"
    info = good_installed.plugins(tmp_path)["acme-notes"]
    assert info["status"] == "loaded"
    assert (info["distribution"], info["version"]) == ("acme-notes", "2.3.4")
    assert info["hooks"] == ["hostcore_events", "hostcore_workers"]
    assert info["registrations"] == [
        {"kind": "worker", "name": "note-counter", "available": True, "reason": None}]


def test_pip_installed_plugin_runs_in_a_tick(good_installed, tmp_path):
    result = good_installed.hostcore(tmp_path, "run", "--once", "--json")
    assert result.returncode == 0, result.stderr
    steps = {s["name"]: s for s in json.loads(result.stdout)["steps"]}
    assert steps["note-counter"]["ok"] and steps["note-counter"]["counts"] == {"notes": 0}


def test_allow_and_block_lists_apply_to_the_installed_plugin(good_installed, tmp_path):
    none = good_installed.plugins(tmp_path, HOSTCORE_LOAD_PLUGINS="")
    assert none["acme-notes"]["status"] == "blocked"
    assert {p["status"] for p in none.values()} == {"builtin", "blocked"}
    blocked = good_installed.plugins(tmp_path, HOSTCORE_DISABLE_PLUGINS="acme-notes")
    assert blocked["acme-notes"]["status"] == "blocked"
    allowed = good_installed.plugins(tmp_path, HOSTCORE_LOAD_PLUGINS="acme-notes")
    assert allowed["acme-notes"]["status"] == "loaded"


def test_plugin_raising_at_import_is_listed_as_failed_with_its_error(broken_installed,
                                                                     tmp_path):
    plugins = broken_installed.plugins(tmp_path)
    broken = plugins["acme-broken"]
    assert broken["status"] == "failed"
    assert broken["distribution"] == "acme-broken"
    assert broken["error"] == (
        "ImportError: acme-broken needs libfrobnicate, which is not installed")
    assert plugins["acme-notes"]["status"] == "loaded"


def test_run_once_still_exits_0_with_the_broken_plugin_installed(broken_installed, tmp_path):
    result = broken_installed.hostcore(tmp_path, "run", "--once")
    assert result.returncode == 0, result.stderr
    assert "'acme-broken'" in result.stderr  # warned about, then skipped


def test_strict_mode_exits_nonzero_naming_the_broken_plugin(broken_installed, tmp_path):
    # The allow-list keeps unrelated installed plugins out of what this test judges.
    result = broken_installed.hostcore(
        tmp_path, "run", "--once", HOSTCORE_STRICT_PLUGINS="1",
        HOSTCORE_LOAD_PLUGINS="acme-notes,acme-broken")
    assert result.returncode == 1
    assert "plugin 'acme-broken' (acme-broken 2.3.4) failed" in result.stderr
    assert "libfrobnicate" in result.stderr


REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = [".", *sorted(
    str(p.parent.relative_to(REPO)) for p in REPO.glob("*/*/pyproject.toml")
    if p.parent.parent.name in ("plugins", "contrib"))]


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_every_distribution_builds_a_wheel_on_its_own(dist, tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(tmp_path), str(REPO / dist)],
        check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    entry_points = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
    if dist == ".":
        assert "hostcore/py.typed" in names
        assert "hostcore/plugin/core.py" in names
        assert "hostcore/scaffold/templates/worker/plugin.py.tmpl" in names
    else:
        assert entry_points, f"{dist} declares no entry point"
        with zipfile.ZipFile(wheel) as archive:
            assert "[hostcore]" in archive.read(entry_points).decode()
        assert not [n for n in names if n.startswith(("tests/", "hostcore/"))]
