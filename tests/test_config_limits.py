"""A config file past what the TOML reader can hold is a ConfigError naming the file.

CPython refuses to turn more than ``sys.get_int_max_str_digits()`` digits into an
int, and ``tomllib`` recurses once per level of nesting: both used to escape as a
``ValueError`` or ``RecursionError`` traceback (exit 1) instead of exit 2 and one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.config import Config, load_config
from hostcore.errors import ConfigError

DEPTH = 100_000

HOSTILE = {
    "a 5,000-digit integer": ("[run]\ninterval_seconds = " + "9" * 5_000 + "\n",
                              "a number has more than"),
    "100k nested inline tables": ("x = " + "{a = " * DEPTH + "1" + "}" * DEPTH + "\n",
                                  "nested too deep"),
    "100k nested arrays in a plugin table": (
        "[plugins.demo]\nx = " + "[" * DEPTH + "1" + "]" * DEPTH + "\n", "nested too deep"),
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir(mode=0o700)
    return folder


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_config_the_reader_cannot_hold_is_a_config_error_naming_the_file(root, name):
    text, says = HOSTILE[name]
    path = root / "hostcore.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_config(None, root)
    assert str(refused.value).startswith(f"{path}: not valid TOML: ")
    assert says in str(refused.value)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_cli_says_so_in_one_line_and_exits_2(root, name):
    text, says = HOSTILE[name]
    (root / "hostcore.toml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "config"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOSTCORE_LOAD_PLUGINS": ""}, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(root / "hostcore.toml") in lines[0] and says in lines[0]


def test_an_integer_within_the_limit_is_still_read(root):
    (root / "hostcore.toml").write_text("[plugins.demo]\nx = " + "9" * 4_000 + "\n")
    config = load_config(None, root)
    assert config.settings.plugins["demo"]["x"] == int("9" * 4_000)


def test_a_running_loop_keeps_its_config_when_the_file_turns_hostile(root):
    path = root / "hostcore.toml"
    path.write_text("[run]\ninterval_seconds = 5\n")
    config = load_config(None, root)
    path.write_text(HOSTILE["100k nested inline tables"][0])
    again = config.reloaded()
    assert isinstance(again, Config) and again.settings.run.interval_seconds == 5
