"""docs/hooks.md documents every hookspec, exactly as its docstring states it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from hostcore.plugin import hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs"
SPECS = sorted(n for n in vars(hookspecs) if n.startswith("hostcore_"))


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_hooks", DOCS / "generate_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def headings() -> set[str]:
    text = (DOCS / "hooks.md").read_text(encoding="utf-8")
    return set(re.findall(r"^## (\S+)\s*$", text, re.MULTILINE))


def test_every_hookspec_has_a_section():
    missing = sorted(set(SPECS) - headings())
    assert not missing, f"hooks missing from docs/hooks.md: {missing}"


def test_every_section_is_a_hookspec():
    assert not headings() - set(SPECS)


@pytest.mark.parametrize("name", SPECS)
def test_hookspec_docstring_states_its_version_and_an_example(name):
    doc = getattr(hookspecs, name).__doc__ or ""
    assert ".. versionadded::" in doc
    assert "Example::" in doc
    assert "@hookimpl" in doc


def test_page_matches_the_docstrings():
    generated = load_generator().render()
    assert (DOCS / "hooks.md").read_text(encoding="utf-8") == generated, (
        "docs/hooks.md is out of date: run `python docs/generate_hooks.py`")
