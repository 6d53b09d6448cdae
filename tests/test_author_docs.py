"""The plugin author guide's examples run as written, and its quoted failure is the
kit's real message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hostcore.testing import ProviderConformance

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE = DOCS / "plugin-author-guide.md"
OWN_PAGES = ("plugin-author-guide.md", "architecture.md", "state-files.md")


def tagged_block(text: str, tag: str) -> str:
    match = re.search(rf"<!-- doc-example: {tag} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"no python block tagged {tag!r} in {GUIDE.name}"
    return match.group(1)


def test_the_guides_plugin_and_its_conformance_test_pass(pytester, monkeypatch):
    text = GUIDE.read_text()
    pytester.makepyfile(standup_plugin=tagged_block(text, "plugin"),
                        test_standup=tagged_block(text, "test"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                          "-p", "hostcore.testing")
    result.assert_outcomes(passed=6)


def test_the_guides_quoted_failure_is_what_the_kit_says():
    guide = " ".join(GUIDE.read_text().split())
    message = ProviderConformance._wrong_error(type("P", (), {"name": "tasks"}), "t#1",
                                               FileNotFoundError())
    assert message in guide


@pytest.mark.parametrize("page", OWN_PAGES)
def test_every_python_block_compiles(page):
    text = (DOCS / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    for number, block in enumerate(blocks, start=1):
        compile(block, f"{page} block {number}", "exec")


ROOT = DOCS.parent
# Every page a reader meets: the README, each docs page, each distribution's README.
LINKED_PAGES = sorted(str(p.relative_to(ROOT)) for p in [
    ROOT / "README.md", *DOCS.glob("*.md"), *ROOT.glob("plugins/*/README.md"),
    *ROOT.glob("contrib/*/README.md"), *ROOT.glob("examples/*/README.md")])


@pytest.mark.parametrize("page", LINKED_PAGES)
def test_every_relative_link_resolves(page):
    path = ROOT / page
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text())
    missing = sorted({t for t in targets if not (path.parent / t).resolve().exists()})
    assert not missing, f"{page} links to missing {missing}"
