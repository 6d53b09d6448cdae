"""scripts/build-dist: every distribution's wheel and sdist, reproducible, checked, offline.

The ``wheelhouse`` fixture (tests/conftest.py) runs ``scripts/build-dist`` once per
test run, or takes the one ``scripts/test-wheels`` built. The offline install uses that
folder alone: pip is given ``--no-index`` and no configuration file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

import hostcore

REPO = Path(__file__).resolve().parents[1]
BUILD_DIST = REPO / "scripts" / "build-dist"
FOLDERS = [REPO, *sorted(p.parent for family in ("plugins", "contrib")
                         for p in (REPO / family).glob("*/pyproject.toml"))]


def pyproject(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))


PROJECTS = {canonicalize_name(pyproject(f)["project"]["name"]): pyproject(f) for f in FOLDERS}
# Every plugin entry point of every plugins/ and contrib/ distribution.
ENTRY_POINTS = {ep for name, p in PROJECTS.items() if name != "hostcore"
                for ep in p["project"]["entry-points"]["hostcore"]}


def artifacts(wheelhouse: Path) -> dict[str, dict[str, Path]]:
    """First-party distribution -> {"wheel": path, "sdist": path}."""
    found: dict[str, dict[str, Path]] = {}
    for path in wheelhouse.iterdir():
        if path.name.endswith(".whl"):
            name, kind = parse_wheel_filename(path.name)[0], "wheel"
        elif path.name.endswith(".tar.gz"):
            name, kind = parse_sdist_filename(path.name)[0], "sdist"
        else:
            continue
        if name in PROJECTS:
            assert kind not in found.get(name, {}), f"two {kind}s of {name}"
            found.setdefault(name, {})[kind] = path
    return found


def wheel_metadata(path: Path) -> Metadata:
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Metadata.from_email(archive.read(name), validate=True)


def build_dist(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BUILD_DIST), *args],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=900)


def test_the_wheelhouse_holds_a_wheel_and_an_sdist_of_every_distribution(wheelhouse):
    built = artifacts(wheelhouse)
    assert set(built) == set(PROJECTS)
    for name, files in built.items():
        version = PROJECTS[name]["project"]["version"]
        assert set(files) == {"wheel", "sdist"}, name
        assert str(parse_wheel_filename(files["wheel"].name)[1]) == version


def test_built_metadata_passes_the_twine_style_check(wheelhouse):
    files = [p for kinds in artifacts(wheelhouse).values() for p in kinds.values()]
    result = build_dist("--check", *map(str, files))
    assert result.returncode == 0, result.stderr
    for name, kinds in artifacts(wheelhouse).items():
        meta = wheel_metadata(kinds["wheel"])
        assert meta.license_expression == "MIT"
        assert meta.project_urls
        assert str(meta.description_content_type).startswith("text/markdown")
        if name != "hostcore":  # the plugin's stated range made it into the wheel
            built_range = [r.specifier for r in map(Requirement, map(str, meta.requires_dist
                                                                    or ()))
                           if r.name == "hostcore"]
            declared = [r.specifier for r in map(Requirement,
                                                 PROJECTS[name]["project"]["dependencies"])
                        if r.name == "hostcore"]
            assert built_range == declared, name


def test_the_check_rejects_metadata_twine_rejects(tmp_path):
    # What hatchling before 1.27 wrote for `license = "MIT"`: a field of metadata 2.4
    # under version 2.1.
    wheel = tmp_path / "acme_old-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("acme_old-1.0.dist-info/METADATA",
                         "Metadata-Version: 2.1\nName: acme-old\nVersion: 1.0\n"
                         "License-Expression: MIT\n\nAbout acme.\n")
    result = build_dist("--check", str(wheel))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert f"build-dist: {wheel}: license-expression introduced in metadata version 2.4, " \
           "not 2.1" in lines
    assert f"build-dist: {wheel}: no Project-URL" in lines


def test_wheels_carry_their_license_and_the_files_beside_the_code(wheelhouse):
    built = artifacts(wheelhouse)
    for name, kinds in built.items():
        with zipfile.ZipFile(kinds["wheel"]) as archive:
            names = archive.namelist()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), name
        assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")], name
        with tarfile.open(kinds["sdist"]) as archive:
            members = {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
        assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= members, name
    with zipfile.ZipFile(built["hostcore"]["wheel"]) as archive:
        names = set(archive.namelist())
    assert {"hostcore/py.typed", "hostcore/scaffold/templates/common/pyproject.toml.tmpl"} \
        <= names


def test_two_builds_of_one_tree_are_byte_identical(tmp_path):
    def build(out: Path, epoch: str) -> dict[str, str]:
        result = build_dist("--no-deps", "--out", str(out), SOURCE_DATE_EPOCH=epoch)
        assert result.returncode == 0, result.stderr
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}

    first = build(tmp_path / "one", "1700000000")
    assert len(first) == 2 * len(PROJECTS)
    assert build(tmp_path / "two", "1700000000") == first
    # The epoch is what fixes the bytes: every member is dated by it.
    wheel = tmp_path / "one" / next(n for n in first
                                    if n.startswith("hostcore-") and n.endswith(".whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert {i.date_time[:3] for i in archive.infolist()} == {(2023, 11, 14)}


def pip(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    # No configuration file: nothing but the wheelhouse is looked at.
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    env = {k: v for k, v in env.items() if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")}
    return subprocess.run([python, "-m", "pip", "--disable-pip-version-check", *args],
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize(("extra", "plugins"), [
    ("github", {"hostcore-github-capture", "hostcore-gh"}),
    ("custody", {"hostcore-file-custody"}),
    ("transcripts", {"hostcore-claude-code", "hostcore-codex"}),
    ("all", set(PROJECTS) - {"hostcore"}),
])
def test_each_extra_resolves_offline_to_its_plugins(wheelhouse, extra, plugins, tmp_path):
    report = tmp_path / "report.json"
    result = pip("install", "--dry-run", "--ignore-installed", "--no-index", "--find-links",
                 str(wheelhouse), "--report", str(report), f"hostcore[{extra}]")
    assert result.returncode == 0, result.stderr
    names = {canonicalize_name(i["metadata"]["name"])
             for i in json.loads(report.read_text())["install"]}
    assert names & set(PROJECTS) == plugins | {"hostcore"}


@pytest.fixture(scope="module")
def installed(wheelhouse, tmp_path_factory) -> Path:
    """A fresh venv with ``hostcore[all]`` installed from the wheelhouse alone."""
    venv = tmp_path_factory.mktemp("offline") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    result = pip("install", "--no-index", "--find-links", str(wheelhouse), "hostcore[all]",
                 python=str(venv / "bin" / "python"))
    assert result.returncode == 0, result.stderr
    return venv


def test_hostcore_all_installs_offline_and_lists_every_plugin_as_loaded(installed, tmp_path):
    check = pip("check", python=str(installed / "bin" / "python"))
    assert check.returncode == 0, check.stdout + check.stderr
    result = subprocess.run([str(installed / "bin" / "hostcore"), "--root", str(tmp_path),
                             "plugins", "--json"], env={"PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    infos = {i["name"]: i for i in json.loads(result.stdout)}
    external = {n: i for n, i in infos.items() if i["status"] != "builtin"}
    assert set(external) == ENTRY_POINTS
    assert {n: i["status"] for n, i in external.items()} == dict.fromkeys(ENTRY_POINTS, "loaded")
    assert all(i["requires_hostcore"] for i in external.values())
    assert {i["hook_api"] for i in infos.values() if i["status"] == "builtin"} == {
        hostcore.HOOK_API_VERSION}
