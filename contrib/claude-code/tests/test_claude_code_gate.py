"""The staleness gate in the real Claude Code's loop, offline against a fake Messages API.

With only ``hostcore hooks install`` done, the model (this file's fake API) writes
``src/a.py`` with the Write tool in a git repository governed by its ``CLAUDE.md``.
When the tool's result comes back, the fake API first waits until the PostToolUse
hook's stamp is in the store, then changes ``CLAUDE.md``, then answers: so the
change lands after the stamp and before the Stop, in that order on any machine. The
Stop hook then exits 2 naming the file, Claude Code hands that to the model in one
more request, the model answers, and the second Stop (``stop_hook_active``) lets the
agent end with status 0.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location(
    "claude_code_fake_messages_api", Path(__file__).with_name("fake_messages_api.py"))
assert _spec is not None and _spec.loader is not None
fake_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_api)

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
GATE_LINE = "- src/a.py: context moved"
FIRST_ANSWER = "I wrote src/a.py."
LAST_ANSWER = "I reviewed src/a.py against the new CLAUDE.md; it holds."
# How long the fake API waits for the PostToolUse hook's stamp (a bound, not a pace:
# it polls until the stamp is there).
STAMP_WAIT_SECONDS = 60.0


class GateApi:
    """The fake Messages API: what it was asked, and the turns it answered."""

    def __init__(self, target: Path, before_answer: Callable[[], None]) -> None:
        self.base_url = ""  # the server's, once it listens
        self.target = target
        self.before_answer = before_answer
        self.requests: list[dict[str, Any]] = []
        self.turns: list[str] = []
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        text = json.dumps(body.get("messages", []))
        with self.lock:  # one conversation: its turns in order
            self.requests.append(body)
            if "tool_result" not in text:
                kind = "write"
            elif GATE_LINE not in text:
                self.before_answer()
                kind = "answer"
            else:
                kind = "after_gate"
            self.turns.append(kind)
        return _events(kind, self.target)


def _events(kind: str, target: Path) -> list[dict[str, Any]]:
    usage = {"input_tokens": 12, "output_tokens": 1}
    if kind == "write":
        block = {"type": "tool_use", "id": "toolu_gate", "name": "Write", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(
            {"file_path": str(target), "content": "def a():\n\treturn 1\n"})}
        return fake_api.message_events(f"msg_{kind}", block, delta, "tool_use", usage)
    delta = {"type": "text_delta", "text": FIRST_ANSWER if kind == "answer" else LAST_ANSWER}
    return fake_api.message_events(f"msg_{kind}", {"type": "text", "text": ""}, delta,
                                   "end_turn", usage)


def _side_reply(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A request not streamed (a title, a quota probe): a plain short answer."""
    return 200, {"id": "msg_side", "type": "message", "role": "assistant",
                 "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "ok"}],
                 "stop_reason": "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 1, "output_tokens": 1}}


def _hostcore(root: Path, env: dict[str, str], *args: str, cwd: Path | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOSTCORE, "--root", str(root), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _targets(root: Path, env: dict[str, str], repo: Path) -> dict[str, tuple[str, list[str]]]:
    done = _hostcore(root, env, "check", "--json", cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    return {Path(t["path"]).name: (t["status"], t["moved"])
            for t in json.loads(done.stdout)["targets"]}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    made = tmp_path / "project"
    (made / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(made)], check=True, timeout=60)
    (made / "CLAUDE.md").write_text("Indent with tabs.\n")
    return made


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "HOSTCORE_LOAD_PLUGINS": "claude-code",
            "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS": "10000"}


@pytest.fixture
def gate_api(tmp_path: Path, repo: Path, env: dict[str, str]) -> Iterator[GateApi]:
    root = tmp_path / "root"

    def change_claude_md_after_the_stamp() -> None:
        deadline = time.monotonic() + STAMP_WAIT_SECONDS
        while "a.py" not in _targets(root, env, repo) and time.monotonic() < deadline:
            time.sleep(0.1)
        (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")

    api = GateApi(repo / "src" / "a.py", change_claude_md_after_the_stamp)
    with fake_api.serving(api.answer, _side_reply) as base_url:
        api.base_url = base_url
        yield api


def test_a_stale_file_at_stop_reaches_the_model_and_claude_code_goes_on_and_ends_with_0(
        claude_code, gate_api, repo, env, tmp_path):
    root = tmp_path / "root"
    env = {**env, "ANTHROPIC_BASE_URL": gate_api.base_url}
    installed = _hostcore(root, env, "hooks", "install", "--agent", "claude-code")
    assert installed.returncode == 0, installed.stderr

    run = subprocess.run([str(claude_code), "-p", "Write src/a.py.", "--output-format",
                          "json", "--allowedTools", "Write"], env=env, cwd=repo,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["is_error"] is False
    assert result["result"] == LAST_ANSWER  # the agent went on after the gate

    # The tool call, the answer that tried to stop, and the request the gate caused.
    assert gate_api.turns == ["write", "answer", "after_gate"]
    assert (repo / "src" / "a.py").read_text() == "def a():\n\treturn 1\n"
    fed_back = json.dumps(gate_api.requests[-1]["messages"])
    assert GATE_LINE in fed_back
    assert "hostcore approve" in fed_back
    # Reporting is separate: the file is still stale for `check`, and no hook faulted.
    assert _targets(root, env, repo) == {"a.py": ("stale", ["context"])}
    status = json.loads(_hostcore(root, env, "status", "--json").stdout)
    assert status["components"]["worker"]["agent-hooks"]["faults"] == {}
