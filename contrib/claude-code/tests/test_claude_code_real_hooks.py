"""The real Claude Code, offline against the fake Messages API (conftest.py), with nothing
done beforehand but ``hostcore hooks install``: its hooks store the session's transcript
rows with no ``hostcore run``, and Claude Code reports no hook failure or cancellation."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
          "SessionEnd")
# Claude Code's debug log line for a hook command that ended (2.1.x).
_HOOK_LINE = re.compile(r"(?P<event>" + "|".join(EVENTS) + r")\S* \[(?P<command>[^\]]*)\] "
                        r"(?:finished|completed) with status (?P<status>\d+)")


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            # This test is about the transcript sources' hook: the other plugins' hooks
            # have tests of their own.
            "HOSTCORE_LOAD_PLUGINS": "claude-code,codex",
            # Claude Code's own knob for SessionEnd hooks (hostcore's budget follows it):
            # on a busy machine 1.5 s can leave the last lines to the next tick, which
            # tests/test_agent_hook_command.py checks; here every row must be stored.
            "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS": "10000"}


def _keys(root: Path, env: dict[str, str]) -> list[str]:
    """The evidence keys stored under ``root``, sorted: what `evidence --json` counts,
    read from the store itself (real SQLite, read-only)."""
    done = subprocess.run([HOSTCORE, "--root", str(root), "evidence", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(f"file:{root / 'store.sqlite3'}?mode=ro",
                                            uri=True)) as db:
        keys = [key for (key,) in db.execute("SELECT key FROM evidence ORDER BY position")]
    assert len(keys) == json.loads(done.stdout)["rows"]
    return sorted(keys)


def test_claude_code_with_installed_hooks_stores_its_transcript_and_reports_no_hook_failure(
        claude_code, messages_api, tmp_path):
    env = _env(tmp_path, messages_api.base_url)
    root = tmp_path / "root"
    project = tmp_path / "project"
    project.mkdir()
    installed = subprocess.run([HOSTCORE, "--root", str(root), "hooks", "install", "--agent",
                                "claude-code"], env=env, capture_output=True, text=True,
                               timeout=60)
    assert installed.returncode == 0, installed.stderr

    run = subprocess.run([str(claude_code), "-p", "Say hello with the echo command.",
                          "--output-format", "json", "--allowedTools", "Bash(echo:*)",
                          "--debug"], env=env, cwd=project, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["is_error"] is False and result["num_turns"] == 2
    assert messages_api.turns() == ["tool_use", "text"]  # the tool call really ran

    # Every hook hostcore installed ran, and Claude Code saw each end with status 0.
    logs = list((Path(env["CLAUDE_CONFIG_DIR"]) / "debug").glob("*.txt"))
    assert logs
    text = "\n".join(log.read_text(errors="replace") for log in logs)
    ours = [m for m in _HOOK_LINE.finditer(text) if "hook --agent claude-code" in m["command"]]
    assert {m["event"] for m in ours} == set(EVENTS)
    assert {m["status"] for m in ours} == {"0"}
    trouble = [line for line in text.splitlines() if "hook" in line.lower() and re.search(
        r"cancel|timed out|timeout|failed|non-blocking error|blocking error", line, re.I)]
    assert trouble == []
    assert "hook" not in run.stderr.lower()

    # The transcript's rows are in the store, with no `hostcore run`: exactly the rows a
    # fresh root reads from the finished transcript (every line with a cwd, and the
    # session's tool and cost lines), nothing missing and nothing twice.
    (transcript,) = (Path(env["CLAUDE_CONFIG_DIR"]) / "projects").glob("*/*.jsonl")
    with_cwd = [line for line in transcript.read_text().splitlines()
                if json.loads(line).get("cwd")]
    assert with_cwd
    stored = _keys(root, env)
    fresh = tmp_path / "fresh-root"
    read_again = subprocess.run([HOSTCORE, "--root", str(fresh), "run", "--once"], env=env,
                                capture_output=True, text=True, timeout=120)
    assert read_again.returncode == 0, read_again.stderr
    expected = _keys(fresh, env)
    assert len(expected) >= len(with_cwd)
    assert stored == expected
    # The hooks left nothing for a tick to store.
    ticked = subprocess.run([HOSTCORE, "--root", str(root), "run", "--once"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert ticked.returncode == 0, ticked.stderr
    assert _keys(root, env) == expected
    faults = subprocess.run([HOSTCORE, "--root", str(root), "status", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    report = json.loads(faults.stdout)
    assert report["components"]["worker"]["agent-hooks"]["faults"] == {}
