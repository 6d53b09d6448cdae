"""The docs name hostcore's modules by the paths they live at now: never a 0.1 path
that is only a deprecation shim (``hostcore.store``), nor one that does not exist.

A dotted name (in prose, a code span or ``from hostcore.x import name``) whose
first part after ``hostcore.`` is a module of the source tree (or a 0.1 alias of
one) is read as a module path and resolved: modules by the source tree, the rest
as attributes. ``hostcore.rows`` (a Postgres table) or
``hostcore.toml`` (a file) name no module, so they are left alone.
``docs/architecture.md`` lists where each old path went, so it is the one page
allowed to name them.
"""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOSTCORE = REPO / "hostcore"
DOCS = sorted((REPO / "docs").glob("*.md"))
# The page that maps every 0.1 path to its new home.
MAPS_OLD_PATHS = {"architecture.md"}
DOTTED = re.compile(r"\bhostcore(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FROM_IMPORT = re.compile(r"from (hostcore(?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+))")


def _module_file(module: str) -> Path | None:
    base = HOSTCORE.parent.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_alias(path: Path) -> bool:
    """A 0.1 module path kept only as a shim (it calls ``hostcore._moved.alias``)."""
    return "from hostcore._moved import alias" in path.read_text(encoding="utf-8")


def problem(dotted: str) -> str | None:
    """Why ``dotted`` is not a current module path (``None``: it is, or names no module)."""
    parts = dotted.split(".")
    if _module_file(f"hostcore.{parts[1]}") is None:
        return None  # not a module path: a table, a file name, a root attribute
    module = "hostcore"
    rest = parts[1:]
    while rest and (found := _module_file(f"{module}.{rest[0]}")) is not None:
        module = f"{module}.{rest.pop(0)}"
        if _is_alias(found):
            return f"{module} is a deprecated alias"
    target: object = importlib.import_module(module)
    for name in rest:
        # Recorded, not raised: what a lazy name imports may warn about other things.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                target = getattr(target, name)
            except AttributeError:
                return f"{dotted}: {name!r} does not exist there"
        moved = [str(w.message) for w in caught
                 if issubclass(w.category, DeprecationWarning) and " moved to " in str(w.message)]
        if moved:
            return f"{dotted}: {moved[0]}"
    return None


def paths_in(text: str) -> set[str]:
    """Dotted names in prose and code, and what ``from hostcore.x import a, b`` names."""
    found = {m.group(0) for m in DOTTED.finditer(text)}
    for module, grouped, names in FROM_IMPORT.findall(text):
        found |= {f"{module}.{name.split(' as ')[0].strip()}"
                  for name in (grouped or names).split(",") if name.strip()}
    return found


def test_the_checker_flags_an_alias_a_moved_name_and_a_missing_one():
    assert problem("hostcore.store.Store") == "hostcore.store is a deprecated alias"
    assert "moved to hostcore.plugin.cli" in (problem("hostcore.cli.pass_host") or "")
    assert "does not exist" in (problem("hostcore.evidence.store.NoSuchThing") or "")
    assert problem("hostcore.evidence.store.Store") is None
    assert problem("hostcore.rows") is None  # a Postgres table, not a module


@pytest.mark.parametrize("page", [p for p in DOCS if p.name not in MAPS_OLD_PATHS],
                         ids=lambda p: p.name)
def test_the_docs_name_only_current_module_paths(page):
    found = sorted(filter(None, map(problem, paths_in(page.read_text(encoding="utf-8")))))
    assert not found, f"{page.name}: " + "; ".join(found)
