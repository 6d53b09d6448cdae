"""The real Codex CLI, offline against the fake Responses API (conftest.py), with nothing
done beforehand but ``hostcore hooks install``: its hooks store the session's rollout
with no ``hostcore run`` (what Codex wrote after its last hook, the next tick), and Codex
reports every hook completed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
# Run in this order for one prompt with one tool call (SessionEnd, where exec fires it,
# comes after its output ends).
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


def _config(base_url: str) -> str:
    # What AGENTS.md measured: without the features and analytics off, a run waits on
    # the network.
    return (f'model = "gpt-5"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            f'sandbox_mode = "danger-full-access"\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{base_url}"\n'
            f'wire_api = "responses"\nenv_key = "FAKE_API_KEY"\n'
            f'[features]\nplugins = false\nremote_plugin = false\napps = false\n'
            f'[analytics]\nenabled = false\n')


def test_codex_with_installed_hooks_stores_its_rollout_and_completes_every_hook(
        codex_cli, responses_api, tmp_path):
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(_config(responses_api.base_url))
    project = tmp_path / "project"
    project.mkdir()
    root = tmp_path / "root"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "test-key",
           "HOSTCORE_LOAD_PLUGINS": "claude-code,codex"}
    installed = subprocess.run([HOSTCORE, "--root", str(root), "hooks", "install", "--agent",
                                "codex"], env=env, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr

    # Codex runs only hooks a person trusted; a test has no person to ask.
    run = subprocess.run([str(codex_cli), "exec", "--skip-git-repo-check",
                          "--dangerously-bypass-hook-trust", "Say hello with echo."],
                         env=env, cwd=project, capture_output=True, text=True, timeout=180,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-3000:]
    assert responses_api.answers() == ["function_call", "message"]
    said = run.stdout + run.stderr
    started = re.findall(r"^hook: (\w+)$", said, re.MULTILINE)
    completed = re.findall(r"^hook: (\w+) Completed$", said, re.MULTILINE)
    assert set(EVENTS) <= set(started)
    assert started == completed  # no hook failed, blocked or was cut short
    assert "hostcore-hook-test" in said  # the tool call really ran

    (rollout,) = (codex_home / "sessions").glob("*/*/*/rollout-*.jsonl")
    lines = rollout.read_text().splitlines()
    done = subprocess.run([HOSTCORE, "--root", str(root), "evidence", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    stored = json.loads(done.stdout)["rows"]
    # Codex writes its rollout behind its hooks: what the last hook could not see yet
    # is the next tick's, and the keys make that tick add each line once.
    assert 0 < stored <= len(lines)
    assert subprocess.run([HOSTCORE, "--root", str(root), "run", "--once"], env=env,
                          capture_output=True, timeout=120).returncode == 0
    done = subprocess.run([HOSTCORE, "--root", str(root), "evidence", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["rows"] == len(lines)
    status = subprocess.run([HOSTCORE, "--root", str(root), "status", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)["components"]["worker"]["agent-hooks"]["faults"] == {}
