"""Every benchmark script still runs (its --quick size) and prints its ratio lines.

This pins that the scripts work, not their figures: speed is judged by running
them at full size (see each script's docstring), never by a timed test. A
script reports a missed target in its output and exits 0; only a crash fails
here, so a busy machine never turns this test red.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hostcore.testing import require_tool

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# A module the scripts share starts with "_": it is no benchmark of its own.
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
# A ratio as the scripts print them: "0.71x", "ratio 1.10" or "ratio to raw  0.057".
RATIO = re.compile(r"\d+(\.\d+)?\s*x\b|ratio\b[^\n]*\d", re.IGNORECASE)


def test_there_is_a_benchmark_per_issue():
    assert {"startup.py", "export_seam.py", "revalidation.py", "poll_cycle.py",
            "custody.py", "export.py", "hooks.py", "mcp.py", "usage.py"} <= set(SCRIPTS)


def _load(script: str) -> ModuleType:
    """A benchmark script as a module (the folder is no package), to ask it things."""
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"),
                                                  BENCHMARKS / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def require_clients(script: str) -> None:
    """Skip (or, where CI requires them, fail) unless the real agent clients a script
    runs are installed, as the script itself finds them."""
    if script != "real_transcripts.py":
        return
    module = _load(script)
    for name, agent in module.AGENTS.items():
        found = module.find_binary(agent.env_dir, *agent.binary) is not None
        require_tool(name, f"npm install --prefix DIR {agent.package}; "
                           f"export {agent.env_dir}=DIR", found=found)


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick_and_prints_ratios(script, tmp_path):
    require_clients(script)
    result = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert RATIO.search(result.stdout), result.stdout[-2000:]


def test_the_ingest_benchmark_measures_a_home_folders_own_transcripts(tmp_path):
    home = tmp_path / "home"
    session = home / ".claude" / "projects" / "-w" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text("".join(json.dumps(
        {"type": "user", "cwd": "/w", "sessionId": "s1", "uuid": f"u{n}",
         "timestamp": f"2026-01-01T00:00:{n:02d}.000Z",
         "message": {"role": "user", "content": "hi"}}) + "\n" for n in range(40)))
    before = session.read_bytes()
    result = subprocess.run([sys.executable, str(BENCHMARKS / "ingest.py"), "--home", str(home),
                             "--runs", "1", "--best-of", "1"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "40 lines in 1 files" in result.stdout
    assert re.search(r"hostcore: +40 rows", result.stdout), result.stdout
    assert "ingest/raw:" in result.stdout and "usage fields" not in result.stdout
    assert session.read_bytes() == before  # read from a copy, never written


def test_the_real_transcripts_benchmark_measures_what_the_real_clients_wrote(tmp_path):
    require_clients("real_transcripts.py")
    home = tmp_path / "home"
    result = subprocess.run([sys.executable, str(BENCHMARKS / "real_transcripts.py"), "--quick",
                             "--turns", "2", "--out", str(home)],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "claude-code session 1/1: 3 answers" in result.stdout
    assert "codex session 1/1: 3 answers" in result.stdout
    (claude,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    assert sum('"name":"Bash"' in line for line in claude.read_text().splitlines()) >= 2
    (rollout,) = (home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl")
    calls = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert sum(line["type"] == "response_item" and line["payload"].get("type") == "function_call"
               for line in calls) == 2
    lines = len(claude.read_text().splitlines()) + len(calls)
    assert f"{lines:,} lines in 2 files" in result.stdout
    assert re.search(r"ingest/raw: [0-9.]+x lines/s by wall clock.*(PASS|MISS)", result.stdout)


def test_the_ingest_benchmark_names_a_home_without_transcripts(tmp_path):
    result = subprocess.run([sys.executable, str(BENCHMARKS / "ingest.py"),
                             "--home", str(tmp_path)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode != 0
    assert f"no transcripts under {tmp_path}" in result.stderr
