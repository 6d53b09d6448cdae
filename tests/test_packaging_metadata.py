"""What every distribution's pyproject.toml declares: versions, ranges, extras, licenses.

Data-driven over the tree: a new folder under plugins/ or contrib/ is checked the
moment its pyproject.toml exists, and ``hostcore[all]`` must name it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

import hostcore

REPO = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for family in ("plugins", "contrib")
                 for p in (REPO / family).glob("*/pyproject.toml"))
RELEASED = [REPO, *PLUGINS]
EXAMPLE = REPO / "examples" / "task-folder-provider"
EVERY = [*RELEASED, EXAMPLE]
URL_BASE = "https://github.com/hostcore/hostcore"


def label(folder: Path) -> str:
    return folder.relative_to(REPO).as_posix() if folder != REPO else "hostcore"


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]


def requirements(lines: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, lines)}


HOST_VERSION = project(REPO)["version"]
MAJOR, MINOR = (int(p) for p in HOST_VERSION.split(".")[:2])
MINOR_RANGE = SpecifierSet(f">={MAJOR}.{MINOR},<{MAJOR}.{MINOR + 1}")
PLUGIN_NAMES = {canonicalize_name(project(f)["name"]) for f in PLUGINS}
# A plugin that needs what a patch release of this minor added states that patch as its
# floor (docs/releasing.md): still this minor, never past it, never above this release.
_RAISED_FLOORS = [SpecifierSet(f">={MAJOR}.{MINOR}.{patch},<{MAJOR}.{MINOR + 1}")
                  for patch in range(1, int(HOST_VERSION.split(".")[2]) + 1)]


def test_hostcore_version_is_its_pyproject_version():
    assert hostcore.__version__ == HOST_VERSION


@pytest.mark.parametrize("folder", PLUGINS, ids=label)
def test_every_plugin_is_released_at_the_hostcore_minor_it_is_built_for(folder):
    meta = project(folder)
    assert meta["version"].split(".")[:2] == HOST_VERSION.split(".")[:2]
    declared = requirements(meta["dependencies"])
    assert declared["hostcore"].specifier in (MINOR_RANGE, *_RAISED_FLOORS)
    # A first-party plugin it builds on is held to the same minor.
    for name in declared.keys() & PLUGIN_NAMES:
        assert declared[name].specifier == MINOR_RANGE, name


def test_the_example_third_party_plugin_states_a_range_too():
    declared = requirements(project(EXAMPLE)["dependencies"])
    assert declared["hostcore"].specifier == MINOR_RANGE


def test_hostcore_all_names_every_plugin_in_the_tree():
    extras = project(REPO)["optional-dependencies"]
    named = requirements(extras["all"])
    assert set(named) == PLUGIN_NAMES, "add the new plugin to hostcore[all] in pyproject.toml"
    assert {str(r.specifier) for r in named.values()} == {str(MINOR_RANGE)}


@pytest.mark.parametrize(("extra", "plugins"), [
    ("github", {"hostcore-github-capture", "hostcore-gh"}),
    ("custody", {"hostcore-file-custody"}),
    ("transcripts", {"hostcore-claude-code", "hostcore-codex"}),
])
def test_hostcore_extras_name_the_plugins_for_one_purpose(extra, plugins):
    named = requirements(project(REPO)["optional-dependencies"][extra])
    assert set(named) == plugins
    assert all(r.specifier == MINOR_RANGE for r in named.values())


def test_linters_are_in_the_dev_extra_not_test():
    extras = {name: requirements(lines)
              for name, lines in project(REPO)["optional-dependencies"].items()}
    assert not {"ruff", "mypy"} & set(extras["test"])
    assert {"ruff", "mypy"} <= set(extras["dev"])
    assert extras["dev"]["hostcore"].extras == {"test"}
    assert "pytest-xdist" in extras["test"]


@pytest.mark.parametrize("folder", EVERY, ids=label)
def test_every_distribution_ships_an_mit_license(folder):
    meta = project(folder)
    assert meta["license"] == "MIT"
    assert meta["license-files"] == ["LICENSE"]
    text = (folder / "LICENSE").read_text("utf-8")
    assert text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text


@pytest.mark.parametrize("folder", RELEASED, ids=label)
def test_every_released_distribution_has_a_changelog_starting_at_its_version(folder):
    text = (folder / "CHANGELOG.md").read_text("utf-8")
    headings = re.findall(r"^## (\S+)", text, re.MULTILINE)
    assert headings and headings[0] == project(folder)["version"]


@pytest.mark.parametrize("folder", EVERY, ids=label)
def test_every_distribution_has_classifiers_and_project_urls(folder):
    meta = project(folder)
    classifiers = set(meta["classifiers"])
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert meta["requires-python"] == ">=3.11"
    typed = any((folder / p / "py.typed").exists() for p in packages(folder))
    assert ("Typing :: Typed" in classifiers) == typed
    urls = meta["urls"]
    assert {"Homepage", "Source", "Issues"} <= set(urls)
    assert all(u.startswith(URL_BASE) for u in urls.values())
    if folder in RELEASED:
        where = "" if folder == REPO else f"{label(folder)}/"
        assert urls["Changelog"] == f"{URL_BASE}/blob/main/{where}CHANGELOG.md"


@pytest.mark.parametrize("folder", EVERY, ids=label)
def test_every_distribution_builds_with_a_hatchling_that_writes_valid_metadata(folder):
    system = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["build-system"]
    (hatchling,) = [Requirement(r) for r in system["requires"] if r.startswith("hatchling")]
    # Before 1.26 hatchling wrote License-Expression under metadata 2.1 (invalid, and
    # twine rejects it); 1.26 writes the legacy License field instead.
    assert not hatchling.specifier.contains("1.26.3")
    assert hatchling.specifier.contains("1.27.0")


def packages(folder: Path) -> list[str]:
    config = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))
    return config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]


def runtime_imports(package: Path) -> set[str]:
    """Top-level modules ``package`` imports at run time (``TYPE_CHECKING`` blocks aside)."""
    found: set[str] = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test).endswith("TYPE_CHECKING")
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


# The pytest plugin hostcore registers (pytest11) is only ever imported by pytest.
IMPORTED_BY_ITS_HOST = {("hostcore", "pytest")}


@pytest.mark.parametrize("folder", EVERY, ids=label)
def test_every_distribution_declares_what_it_imports(folder):
    first_party = {p: canonicalize_name(project(f)["name"]) for f in EVERY for p in packages(f)}
    third_party = importlib.metadata.packages_distributions()
    declared = set(requirements(project(folder)["dependencies"]))
    own = packages(folder)
    missing = []
    for package in own:
        for module in sorted(runtime_imports(folder / package)):
            if module in sys.stdlib_module_names or module in own:
                continue
            if (package, module) in IMPORTED_BY_ITS_HOST:
                continue
            providers = ({first_party[module]} if module in first_party
                         else {canonicalize_name(d) for d in third_party.get(module, [])})
            if not providers & declared:
                missing.append(f"{module} (from {sorted(providers) or 'nothing installed'})")
    assert not missing, f"{label(folder)} imports but does not declare: {missing}"
