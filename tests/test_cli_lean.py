"""``run --once`` and ``status --json`` take a lean path without click
(hostcore.cli.lean): exactly those forms, and the same output, failures and exit
statuses as the full command line gives the same arguments."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.cli.argv import lean_command
from hostcore.host import Host


@pytest.mark.parametrize("args, expected", [
    (["run", "--once"], ("run", None, None, False)),
    (["run", "--once", "--json"], ("run", None, None, True)),
    (["--root", "/r", "run", "--json", "--once"], ("run", "/r", None, True)),
    (["--root=/r", "--config", "/c.toml", "status", "--json"],
     ("status", "/r", "/c.toml", True)),
])
def test_the_lean_forms_are_read_with_their_root_options(args, expected):
    found = lean_command(args, {})
    assert found is not None
    assert (found.name, found.root, found.config, found.as_json) == expected


@pytest.mark.parametrize("args", [
    ["run"], ["run", "--json"], ["run", "--once", "-q"], ["-q", "run", "--once"],
    ["-v", "run", "--once"], ["--color", "never", "status", "--json"], ["status"],
    ["status", "--json", "-v"], ["status", "--json", "--watch"], ["plugins", "--json"],
    ["run", "--once", "--help"], ["--root"], ["--root", "", "run", "--once"],
    ["--root", "  ", "status", "--json"], ["hook", "--agent", "claude-code"],
])
def test_every_other_form_goes_through_click(args):
    assert lean_command(args, {}) is None


def test_a_blank_root_variable_or_a_config_folder_goes_through_click(tmp_path):
    # click refuses these with its own message; the lean path leaves them to it.
    assert lean_command(["run", "--once"], {"HOSTCORE_ROOT": "  "}) is None
    assert lean_command(["--config", str(tmp_path), "run", "--once"], {}) is None
    assert lean_command(["run", "--once"], {"HOSTCORE_ROOT": ""}) is not None


def _volatile(text: str) -> str:
    """``text`` without what changes from run to run: durations and ages."""
    text = re.sub(r'"(duration_ms|[a-z_]*age_seconds)": ?[0-9.]+', r'"\1": 0', text)
    return re.sub(r"in [0-9]+ ms", "in 0 ms", text)


def both_ways(root: Path, *args: str, env: dict[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``hostcore --root ROOT ARGS`` as the console script runs it (the lean path) and
    through click (run_cli), in processes of their own."""
    env = {**os.environ, **(env or {})}
    line = ["--root", str(root), *args]
    lean = subprocess.run([sys.executable, "-m", "hostcore", *line], env=env,
                          capture_output=True, text=True, timeout=120)
    click = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom hostcore.cli.app import run_cli\n"
                               "sys.exit(run_cli(sys.argv[1:]))", *line],
        env=env, capture_output=True, text=True, timeout=120)
    return lean, click


def assert_alike(lean: subprocess.CompletedProcess[str],
                 click: subprocess.CompletedProcess[str]) -> None:
    assert lean.returncode == click.returncode, (lean.stderr, click.stderr)
    assert _volatile(lean.stdout) == _volatile(click.stdout)
    assert _volatile(lean.stderr) == _volatile(click.stderr)


def test_run_once_and_status_print_what_the_full_command_line_prints(tmp_path):
    root = tmp_path / "root"
    for args in (("run", "--once", "--json"), ("run", "--once"), ("status", "--json")):
        lean, click = both_ways(root, *args)
        assert_alike(lean, click)
        assert lean.returncode == 0, lean.stderr
    lean, _ = both_ways(root, "status", "--json")
    assert json.loads(lean.stdout)["last_tick"]["ok"] is True


def test_a_bad_config_exits_2_naming_it_on_both_paths(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text("[run\ninterval_seconds = 1\n")
    for args in (("run", "--once"), ("status", "--json")):
        lean, click = both_ways(root, *args)
        assert_alike(lean, click)
        assert lean.returncode == 2 and "hostcore: config error:" in lean.stderr
        assert "hostcore.toml" in lean.stderr


def test_a_failing_step_exits_1_naming_it_on_both_paths(tmp_path, fake_site, plugin_sources):
    fake_site.add("fake-failing", {"failing": plugin_sources("failing")})
    env = {"PYTHONPATH": str(fake_site.folder), "HOSTCORE_LOAD_PLUGINS": "fake-failing"}
    lean, click = both_ways(tmp_path / "root", "run", "--once", env=env)
    assert_alike(lean, click)
    assert lean.returncode == 1
    assert "hostcore: step 'boom' failed: RuntimeError: the boom worker fails" in lean.stderr


def test_a_held_step_lock_exits_1_naming_the_holder_on_both_paths(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text("[run]\nlock_wait_seconds = 0\n")
    host = Host(root=root, load_entrypoints=False, env={})
    try:
        with host.step_lock():
            lean, click = both_ways(root, "run", "--once", "--json")
    finally:
        host.close()
    assert_alike(lean, click)
    assert lean.returncode == 1 and lean.stdout == ""
    assert str(os.getpid()) in lean.stderr  # the holder is named


def test_a_damaged_store_fails_its_steps_and_the_status_alike_on_both_paths(tmp_path):
    root = tmp_path / "root"
    both_ways(root, "run", "--once")  # a root with its store
    for store in root.rglob("*.sqlite3"):
        store.write_bytes(b"this is not a database" * 100)
    for args in (("run", "--once"), ("status", "--json")):
        lean, click = both_ways(root, *args)
        assert_alike(lean, click)
        assert "not an evidence store, or damaged" in lean.stderr + lean.stdout
        if args[0] == "run":
            assert lean.returncode == 1  # the steps that need the store failed
