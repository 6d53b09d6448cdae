"""docs/plugins.md: the smallest plugin and its tests run as written."""

from __future__ import annotations

import re
from pathlib import Path

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_smallest_plugin_and_its_tests_pass(pytester):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    plugin = next(b for b in blocks if b.startswith("# acme_notes/plugin.py"))
    tests = next(b for b in blocks if "from acme_notes import plugin" in b)
    package = pytester.mkpydir("acme_notes")
    (package / "plugin.py").write_text(plugin)
    pytester.makepyfile(test_acme_notes=tests)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
