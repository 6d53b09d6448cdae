"""What the agent-hook tests share: running the real ``hostcore`` console script as an
agent runs its hooks, and writing transcripts where Claude Code and Codex write them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HOSTCORE = str(Path(sys.executable).parent / "hostcore")


def agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with its own home, Claude Code and Codex folders, and only the
    two transcript plugins loaded (the hook's own behaviour, not every plugin's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOSTCORE_", "CLAUDE",
                                                                     "CODEX"))}
    env.update(HOME=str(tmp_path / "home"), CLAUDE_CONFIG_DIR=str(tmp_path / "home" / ".claude"),
               CODEX_HOME=str(tmp_path / "home" / ".codex"),
               HOSTCORE_LOAD_PLUGINS="claude-code,codex",
               # A SessionEnd with time enough on a busy machine: these tests are about
               # what it stores, the default budget's about what it leaves (below).
               CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS="20000")
    env.update(extra)
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def hook(root: Path, env: dict[str, str], payload: bytes | dict[str, Any],
         agent: str = "claude-code", *args: str) -> subprocess.CompletedProcess[bytes]:
    """``hostcore --root ROOT hook --agent AGENT`` with ``payload`` on stdin."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run([HOSTCORE, "--root", str(root), *args, "hook", "--agent", agent],
                          input=data, capture_output=True, env=env, timeout=60)


def hook_then(root: Path, env: dict[str, str], payload: dict[str, Any], report: str
              ) -> str:
    """Run the hook for ``payload`` in a Python process of its own, then ``report`` (an
    expression over ``sys``) in that process as it exits: the line it makes."""
    script = (
        "import sys\n"
        "from hostcore.__main__ import main\n"
        "try:\n"
        f"    main(['--root', {str(root)!r}, 'hook', '--agent', 'claude-code'])\n"
        "except SystemExit:\n"
        f"    sys.stderr.write('REPORT ' + str(({report})) + '\\n')\n"
        "    raise\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    return next(line for line in done.stderr.decode().splitlines()
                if line.startswith("REPORT ")).removeprefix("REPORT ")


def hostcore(root: Path, env: dict[str, str], *args: str,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOSTCORE, "--root", str(root), *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=cwd)


def status(root: Path, env: dict[str, str]) -> dict[str, Any]:
    done = hostcore(root, env, "status", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def hook_faults(root: Path, env: dict[str, str]) -> dict[str, int]:
    faults: dict[str, int] = status(root, env)["components"]["worker"]["agent-hooks"]["faults"]
    return faults


def stored_rows(root: Path, env: dict[str, str]) -> int:
    done = hostcore(root, env, "evidence", "--json")
    assert done.returncode == 0, done.stderr
    rows: int = json.loads(done.stdout)["rows"]
    return rows


def claude_line(session: str, n: int, cwd: str = "/work/project") -> str:
    return json.dumps({"type": "user" if n % 2 else "assistant", "cwd": cwd,
                       "sessionId": session, "uuid": f"{session}-{n}",
                       "timestamp": f"2026-01-01T00:00:{n % 60:02d}Z",
                       "message": {"content": "x" * 200}})


def claude_transcript(env: dict[str, str], session: str, lines: int) -> Path:
    """A Claude Code transcript of ``lines`` lines where Claude Code writes one."""
    folder = Path(env["CLAUDE_CONFIG_DIR"]) / "projects" / "-work-project"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text("".join(claude_line(session, n) + "\n" for n in range(lines)))
    return path


def claude_event(name: str, session: str, transcript: Path | None, **fields: Any
                 ) -> dict[str, Any]:
    """A payload as Claude Code writes it on a hook's stdin."""
    payload: dict[str, Any] = {"hook_event_name": name, "session_id": session,
                               "cwd": "/work/project", "permission_mode": "default",
                               "transcript_path": str(transcript) if transcript else ""}
    payload.update(fields)
    return payload
