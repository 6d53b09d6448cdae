"""Usage of Codex rollouts, through real ``hostcore`` processes, against the totals
Codex itself writes: every ``token_count`` event carries the session's running
``info.total_token_usage`` and the response's ``last_token_usage``. Codex writes a
total again without a new response at times (and ``info`` is null before the
first), so the sum of the per-response figures hostcore keeps must equal the last
total of each session, per model and per day.

Format (Codex 0.3x to 0.169): ``{"timestamp", "type": "event_msg", "payload":
{"type": "token_count", "info": {"total_token_usage": {"input_tokens",
"cached_input_tokens", "output_tokens", "reasoning_output_tokens",
"total_tokens"}, "last_token_usage": {...}, "model_context_window"},
"rate_limits": {...}}}``; ``turn_context`` payloads name the ``model``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")


def _ts(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _figure(fresh: int, cached: int, output: int) -> dict[str, int]:
    return {"input_tokens": fresh + cached, "cached_input_tokens": cached,
            "output_tokens": output, "reasoning_output_tokens": output // 3,
            "total_tokens": fresh + cached + output}


def rollout(cwd: str, session: str, start: float, rng: random.Random
            ) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """A rollout, and the tokens per model Codex's own totals say it used."""
    lines: list[dict[str, Any]] = [
        {"timestamp": _ts(start), "type": "session_meta",
         "payload": {"id": session, "timestamp": _ts(start), "cwd": cwd,
                     "originator": "codex_cli_rs", "cli_version": "0.169.0"}},
        {"timestamp": _ts(start), "type": "event_msg",
         "payload": {"type": "token_count", "info": None, "rate_limits": None}}]
    total = [0, 0, 0]  # fresh input, cached input, output
    by_model: dict[str, dict[str, int]] = {}
    moment = start
    for turn in range(rng.randint(4, 12)):
        model = rng.choice(["gpt-5-codex", "gpt-5", "gpt-5-mini"])
        moment += rng.randint(60, 9000)
        lines.append({"timestamp": _ts(moment), "type": "turn_context",
                      "payload": {"cwd": cwd, "approval_policy": "never", "model": model}})
        for _ in range(rng.randint(1, 3)):
            moment += rng.randint(1, 300)
            last = [rng.randint(1, 4000), rng.randint(0, 50000), rng.randint(1, 2000)]
            total = [t + n for t, n in zip(total, last, strict=True)]
            spent = by_model.setdefault(model, dict.fromkeys(KINDS, 0))
            spent["input_tokens"] += last[0]
            spent["cache_read_input_tokens"] += last[1]
            spent["output_tokens"] += last[2]
            event = {"timestamp": _ts(moment), "type": "event_msg",
                     "payload": {"type": "token_count",
                                 "info": {"total_token_usage": _figure(*total),
                                          "last_token_usage": _figure(*last),
                                          "model_context_window": 272000},
                                 "rate_limits": {"primary": {"used_percent": 1.0}}}}
            lines.append({"timestamp": _ts(moment), "type": "response_item",
                          "payload": {"type": "function_call", "name": "exec_command",
                                      "arguments": "{}", "call_id": f"c{turn}"}})
            lines.append(event)
            if rng.random() < 0.4:  # the same total written again
                lines.append({**event, "timestamp": _ts(moment + 1)})
    return lines, by_model


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _run(root: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TZ": "UTC",
           "HOSTCORE_LOAD_PLUGINS": "codex"}
    return subprocess.run([HOSTCORE, "--root", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_usage_per_model_equals_the_totals_codex_wrote(tmp_path):
    home = tmp_path / "home"
    rng = random.Random(3)
    expected: dict[str, dict[str, int]] = {}
    last_totals = []
    for n in range(3):
        session = f"0199-{n:04d}"
        lines, by_model = rollout(str(tmp_path / "work" / f"p{n}"), session,
                                  1_764_000_000.0 + n * 50_000, rng)
        _write(home / ".codex" / "sessions" / "2025" / "11" / "24" /
               f"rollout-2025-11-24T10-00-00-{session}.jsonl", lines)
        for model, spent in by_model.items():
            mine = expected.setdefault(model, dict.fromkeys(KINDS, 0))
            for kind in KINDS:
                mine[kind] += spent[kind]
        last_totals.append([line for line in lines if line["type"] == "event_msg"
                            ][-1]["payload"]["info"]["total_token_usage"])
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(f'[plugins.codex]\nhome = "{home}"\n')
    done = _run(root, "run", "--once", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(_run(root, "usage", "--json", "--by", "model", home=home).stdout)
    assert {e["key"]: {k: e[k] for k in KINDS} for e in report["entries"]} == expected
    # The last total of each session is what Codex says the session used.
    totals = report["totals"]
    assert totals["input_tokens"] + totals["cache_read_input_tokens"] == sum(
        t["input_tokens"] for t in last_totals)
    assert totals["cache_read_input_tokens"] == sum(t["cached_input_tokens"]
                                                   for t in last_totals)
    assert totals["output_tokens"] == sum(t["output_tokens"] for t in last_totals)
    assert all(e["cost_usd"] is not None and e["cost_usd"] > 0 for e in report["entries"])
    days = json.loads(_run(root, "usage", "--json", home=home).stdout)
    assert days["totals"] == report["totals"] and len(days["entries"]) >= 2
    # Read again: nothing doubles.
    assert _run(root, "run", "--once", home=home).returncode == 0
    again = json.loads(_run(root, "usage", "--json", "--by", "model", home=home).stdout)
    assert again == report


def test_hostile_token_counts_are_counted_and_skipped_and_no_total_moves(tmp_path):
    home = tmp_path / "home"
    cwd = str(tmp_path / "work" / "x")

    def count(ts: str, total: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": ts, "type": "event_msg",
                "payload": {"type": "token_count", "info": {"total_token_usage": total}}}

    _write(home / ".codex" / "sessions" / "2025" / "11" / "24" / "rollout-x-0199-h.jsonl", [
        {"timestamp": "2025-11-24T10:00:00.000Z", "type": "session_meta",
         "payload": {"id": "0199-h", "cwd": cwd}},
        {"timestamp": "2025-11-24T10:00:00.000Z", "type": "turn_context",
         "payload": {"cwd": cwd, "model": "gpt-5"}},
        count("2025-11-24T10:00:01.000Z", _figure(100, 50, 10)),
        count("2025-11-24T10:00:02.000Z", {**_figure(200, 50, 10), "input_tokens": "300"}),
        count("2025-11-24T10:00:03.000Z", {**_figure(200, 50, 10), "output_tokens": -1}),
        count("2025-11-24T10:00:04.000Z", {**_figure(200, 50, 10), "input_tokens": 10**30}),
        count("2025-11-24T10:00:05.000Z", {**_figure(200, 50, 10), "cached_input_tokens": 10**6}),
        {"timestamp": "2025-11-24T10:00:06.000Z", "type": "turn_context",
         "payload": {"cwd": cwd, "model": "gpt-5\n\x07"}},
        count("2025-11-24T10:00:07.000Z", _figure(120, 60, 15)),
    ])
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(f'[plugins.codex]\nhome = "{home}"\n')
    assert _run(root, "run", "--once", home=home).returncode == 0
    report = json.loads(_run(root, "usage", "--json", home=home).stdout)
    assert [report["totals"][k] for k in KINDS] == [120, 15, 0, 60]
    status = json.loads(_run(root, "status", "--json", home=home).stdout)
    health = status["components"]["worker"]["ingest"]["sources"]["codex"]
    assert health["skipped"] == {"malformed": 5}
