"""Benchmark: ingest against the raw baseline on real transcripts, written by the real
Claude Code and Codex.

Each session runs the real client offline (as ``../shared/AGENTS.md`` measured) in a
project folder with a git remote, against a fake API on 127.0.0.1 that answers every
request with some text and a shell call (an ``echo`` of a few words) until the session
holds ``--turns`` results, then with text alone. The transcripts are the clients' own:
their line types and sizes, their request records and summary lines, usage on every
response. Then ``ingest.py --home`` measures the ingest/raw pairs on them (target
>= 0.6x by wall clock and by CPU), and prints its PASS or MISS.

The clients come from npm (``.ci/run`` installs them): ``$HOSTCORE_CLAUDE_CODE_DIR`` and
``$HOSTCORE_CODEX_DIR``, else ``node_modules`` beside the repository.

Usage: ``python benchmarks/real_transcripts.py [--quick] [--sessions N] [--turns N]
[--runs N] [--out DIR]`` (12 sessions of each agent, 150 shell calls each, about
20 MB, by default; ``--quick``: one session of three; ``--out DIR``: write the home
folder there and keep it, to measure again with ``ingest.py --home DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from hostcore.testing.fake_http import FakeApiHandler, serving

REPO = Path(__file__).resolve().parents[1]
PROJECTS = 4
WORDS = ("build", "test", "lint", "commit", "branch", "merge", "rebase", "deploy", "review",
         "patch", "module", "store", "ledger", "export", "policy", "source")
CLAUDE_MODELS = ("claude-sonnet-4-5", "claude-opus-4-1")
CODEX_MODELS = ("gpt-5", "gpt-5-codex")
Events = list[dict[str, Any]]


def words(rng: random.Random, most: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, most)))


def find_binary(env_dir: str, *pattern: str) -> Path | None:
    """The native binary of an npm package, under ``$env_dir`` or beside the repo."""
    folders = [Path(os.environ[env_dir])] if os.environ.get(env_dir) else []
    for folder in [*folders, REPO]:
        for found in sorted((folder / "node_modules").glob(str(Path(*pattern)))):
            if found.is_file() and os.access(found, os.X_OK):
                return found
    return None


class Turns:
    """One session's fake model: text and a shell call per answer, ``turns`` times."""

    def __init__(self, turns: int, rng: random.Random, model: str) -> None:
        self.turns, self.rng, self.model = turns, rng, model
        self.answered = 0

    def next(self, results: int, offers_shell: bool) -> tuple[int, str, str | None]:
        """This answer's number, its text and its shell command (``None``: the last)."""
        self.answered += 1
        command = (f"echo {words(self.rng, 30)}"
                   if offers_shell and results < self.turns else None)
        return self.answered, words(self.rng, 60), command


def claude_events(turns: Turns, body: dict[str, Any]) -> Events:
    """A streamed Messages API answer: a text block, then a ``Bash`` call if due."""
    results = sum(1 for message in body.get("messages", [])
                  if isinstance(message.get("content"), list)
                  for block in message["content"]
                  if isinstance(block, dict) and block.get("type") == "tool_result")
    offers = any(tool.get("name") == "Bash" for tool in body.get("tools") or [])
    n, text, command = turns.next(results, offers)
    blocks: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": text})]
    if command is not None:
        blocks.append(({"type": "tool_use", "id": f"toolu_{n:05d}", "name": "Bash", "input": {}},
                       {"type": "input_json_delta", "partial_json": json.dumps(
                           {"command": command, "description": "print the words"})}))
    usage = {"input_tokens": 40 + n, "output_tokens": 1,
             "cache_creation_input_tokens": 300 + 20 * n, "cache_read_input_tokens": 900 * n}
    events: Events = [{"type": "message_start", "message": {
        "id": f"msg_{turns.rng.getrandbits(48):012x}", "type": "message", "role": "assistant",
        "model": turns.model, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage}}]
    for index, (start, delta) in enumerate(blocks):
        events += [{"type": "content_block_start", "index": index, "content_block": start},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    stop = "tool_use" if command is not None else "end_turn"
    return [*events, {"type": "message_delta", "usage": {"output_tokens": 20 + 3 * n},
                      "delta": {"stop_reason": stop, "stop_sequence": None}},
            {"type": "message_stop"}]


def codex_events(turns: Turns, body: dict[str, Any]) -> Events:
    """A streamed Responses API answer: a message, then an ``exec_command`` call if due."""
    items = [item for item in body.get("input") or [] if isinstance(item, dict)]
    results = sum(1 for item in items if item.get("type") == "function_call_output")
    offers = any(isinstance(tool, dict) and tool.get("name") == "exec_command"
                 for tool in body.get("tools") or [])
    n, text, command = turns.next(results, offers)
    output: list[dict[str, Any]] = [
        {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    if command is not None:
        output.append({"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                       "name": "exec_command", "arguments": json.dumps({"cmd": command}),
                       "status": "completed"})
    usage = {"input_tokens": 1_000 + 40 * n, "input_tokens_details": {"cached_tokens": 30 * n},
             "output_tokens": 20 + n, "output_tokens_details": {"reasoning_tokens": n},
             "total_tokens": 1_020 + 71 * n}
    response = {"id": f"resp_{n}", "object": "response", "created_at": 0,
                "model": turns.model, "output": []}
    events: Events = [{"type": "response.created",
                       "response": {**response, "status": "in_progress"}}]
    for index, item in enumerate(output):
        events += [{"type": "response.output_item.added", "output_index": index,
                    "item": {**item, "status": "in_progress"}},
                   {"type": "response.output_item.done", "output_index": index, "item": item}]
    return [*events, {"type": "response.completed", "response": {
        **response, "status": "completed", "output": output, "usage": usage}}]


def fake_api(turns: Turns, answer: Callable[[Turns, dict[str, Any]], Events],
             streams: Callable[[str, dict[str, Any]], bool]) -> type[FakeApiHandler]:
    """A handler that streams ``answer`` where ``streams`` says a request wants it,
    counts tokens for Claude Code's probes, and answers anything else briefly."""
    class Handler(FakeApiHandler):
        def do_POST(self) -> None:
            body = self.json_body()
            path = self.path.split("?", 1)[0]
            if streams(path, body):
                self.send_events(answer(turns, body))
            elif path.endswith("/count_tokens"):
                self.send_json({"input_tokens": 12})
            elif path == "/v1/messages":  # a title or a quota probe, not streamed
                self.send_json({"id": "msg_probe", "type": "message", "role": "assistant",
                                "model": turns.model, "content": [{"type": "text", "text": "ok"}],
                                "stop_reason": "end_turn", "stop_sequence": None,
                                "usage": {"input_tokens": 3, "output_tokens": 1}})
            else:
                self.send_bytes(404, b"", None)

        def do_GET(self) -> None:
            self.send_bytes(404, b"", None)

    return Handler


def project(home: Path, n: int) -> Path:
    """A project folder with a git remote, as the sessions' working directory."""
    folder = home / "work" / f"project-{n}"
    (folder / ".git").mkdir(parents=True, exist_ok=True)
    (folder / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = https://github.com/acme/project-{n}.git\n')
    return folder


def run_claude(binary: Path, home: Path, cwd: Path, turns: Turns) -> None:
    handler = fake_api(turns, claude_events,
                       lambda path, body: path == "/v1/messages" and bool(body.get("stream")))
    with serving(handler) as base_url:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "benchmark",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "DISABLE_TELEMETRY": "1"}
        run([str(binary), "-p", "Run the shell commands you are given.", "--output-format",
             "json", "--allowedTools", "Bash(echo:*)", "--max-turns", str(turns.turns + 5)],
            env, cwd)


def run_codex(binary: Path, home: Path, cwd: Path, turns: Turns) -> None:
    handler = fake_api(turns, codex_events, lambda path, body: path.endswith("/responses"))
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    with serving(handler) as base_url:
        # Without the features and analytics off, a run waits on the network (AGENTS.md).
        (codex_home / "config.toml").write_text(
            f'model = "{turns.model}"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            f'sandbox_mode = "danger-full-access"\n[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{base_url}/v1"\nwire_api = "responses"\nenv_key = "FAKE_API_KEY"\n'
            f'[features]\nplugins = false\nremote_plugin = false\napps = false\n'
            f'[analytics]\nenabled = false\n')
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "benchmark"}
        run([str(binary), "exec", "--skip-git-repo-check", "Run the shell commands you are "
             "given."], env, cwd)


def run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"{Path(command[0]).name} exited {done.returncode}: "
                         f"{done.stderr[-2000:]}")


class Agent(NamedTuple):
    env_dir: str  # where .ci/run installs the npm package
    binary: tuple[str, ...]  # the native binary's path under node_modules (a glob)
    package: str
    models: tuple[str, ...]
    runner: Callable[[Path, Path, Path, Turns], None]
    transcripts: Path  # under the home folder


AGENTS = {
    "claude-code": Agent("HOSTCORE_CLAUDE_CODE_DIR",
                         ("@anthropic-ai", "claude-code-linux-x64", "claude"),
                         "@anthropic-ai/claude-code@2.1.328", CLAUDE_MODELS, run_claude,
                         Path(".claude", "projects")),
    "codex": Agent("HOSTCORE_CODEX_DIR",
                   ("@openai", "codex-linux-x64", "vendor", "*", "bin", "codex"),
                   "@openai/codex@0.169.0", CODEX_MODELS, run_codex, Path(".codex", "sessions")),
}


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.jsonl")) if folder.is_dir() else 0


def write_home(home: Path, sessions: int, turns: int, seed: int) -> None:
    """``sessions`` sessions of each agent of ``turns`` shell calls, under ``home``."""
    binaries = {}
    for name, agent in AGENTS.items():
        found = find_binary(agent.env_dir, *agent.binary)
        if found is None:
            raise SystemExit(f"{name} is not installed: npm install --prefix DIR "
                             f"{agent.package}; export {agent.env_dir}=DIR")
        binaries[name] = found
    rng = random.Random(seed)
    for session in range(sessions):
        for name, agent in AGENTS.items():
            script = Turns(turns, random.Random(rng.getrandbits(64)),
                           agent.models[session % len(agent.models)])
            tree = home / agent.transcripts
            before, started = tree_bytes(tree), time.perf_counter()
            agent.runner(binaries[name], home, project(home, session % PROJECTS), script)
            print(f"{name} session {session + 1}/{sessions}: {script.answered} answers, "
                  f"{(tree_bytes(tree) - before) / 1e3:,.0f} kB in "
                  f"{time.perf_counter() - started:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one session of three calls")
    parser.add_argument("--sessions", type=int, default=None, help="sessions per agent")
    parser.add_argument("--turns", type=int, default=None, help="shell calls per session")
    parser.add_argument("--runs", type=int, default=None,
                        help="interleaved ingest/raw pairs (5 by default, 1 with --quick)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the home folder here and keep it (else a temp dir)")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args(argv)
    sessions = args.sessions or (1 if args.quick else 12)
    turns = args.turns or (3 if args.quick else 150)
    runs = args.runs or (1 if args.quick else 5)
    home = (args.out or Path(tempfile.mkdtemp(prefix="hostcore-real-transcripts-"))).resolve()
    try:
        write_home(home, sessions, turns, args.seed)
        measure = [sys.executable, str(Path(__file__).with_name("ingest.py")), "--home",
                   str(home), "--runs", str(runs)] + (["--best-of", "1"] if args.quick else [])
        return subprocess.run(measure, check=False).returncode
    finally:
        if args.out is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
