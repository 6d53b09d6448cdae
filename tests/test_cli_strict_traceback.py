"""Strict mode (``HOSTCORE_STRICT_PLUGINS=1``) shows the failing plugin's traceback
without ``-vv``, as the plugin author's guide says; lenient mode keeps its one line.
Real ``hostcore`` subprocesses loading a real (hand-installed) broken distribution."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRACEBACK = "Traceback (most recent call last):"


def hostcore(root: Path, site: Any, *args: str, strict: bool
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env.update({"PYTHONPATH": str(site.folder), "HOSTCORE_LOAD_PLUGINS": "fake-broken"})
    if strict:
        env["HOSTCORE_STRICT_PLUGINS"] = "1"
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def broken_site(fake_site: Any, plugin_sources: Callable[[str], str]) -> str:
    (module,) = fake_site.add("fake-broken", {"broken": plugin_sources("broken")}).values()
    return module


def test_strict_mode_prints_the_plugins_traceback_without_vv(tmp_path, fake_site,
                                                             plugin_sources):
    module = broken_site(fake_site, plugin_sources)
    for command in (["plugins"], ["status"], ["run", "--once"]):
        done = hostcore(tmp_path / "root", fake_site, *command, strict=True)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.splitlines()
        assert lines[0] == ("hostcore: plugin 'broken' (fake-broken 1.0) failed: "
                            "RuntimeError: the broken plugin cannot start"), done.stderr
        assert TRACEBACK in done.stderr
        # Down to the plugin's own line, not only hostcore's frames.
        assert f"{module}.py" in done.stderr
        assert "RuntimeError: the broken plugin cannot start" in lines
        assert lines[-1].startswith("hostcore.errors.PluginLoadError: plugin 'broken'")


def test_strict_mode_with_vv_prints_the_traceback_once(tmp_path, fake_site, plugin_sources):
    broken_site(fake_site, plugin_sources)
    done = hostcore(tmp_path / "root", fake_site, "-vv", "plugins", strict=True)
    assert done.returncode == 1
    assert done.stderr.count("hostcore.errors.PluginLoadError: plugin 'broken'") == 1


def test_lenient_mode_warns_in_one_line_and_goes_on(tmp_path, fake_site, plugin_sources):
    broken_site(fake_site, plugin_sources)
    done = hostcore(tmp_path / "root", fake_site, "status", strict=False)
    assert done.returncode == 0, done.stderr
    assert "hostcore: WARNING: plugin 'broken' (fake-broken 1.0) failed and was skipped" \
        in done.stderr
    assert TRACEBACK not in done.stderr
