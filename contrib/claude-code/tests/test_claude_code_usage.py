"""Usage of Claude Code transcripts, through real ``hostcore`` processes, against the
real ``ccusage`` (npm ``ccusage@18.0.11``, offline) over the same folder.

``ccusage`` is found under ``$HOSTCORE_CCUSAGE_DIR/node_modules/.bin`` (``.ci/run``
installs it there) or under ``node_modules`` beside the repository; missing, the
tests that run it are skipped, or failed where ``$HOSTCORE_REQUIRED_TOOLS`` says so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcore.testing import require_tool

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
REPO = Path(__file__).resolve().parents[3]
ENV_DIR = "HOSTCORE_CCUSAGE_DIR"
INSTALL = f"npm install --prefix DIR ccusage@18.0.11; export {ENV_DIR}=DIR"
KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")
# ccusage's names for the same kinds.
CC_KINDS = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens")

# -- transcripts in the real format ------------------------------------------------
# Each API response is written as Claude Code writes it: one ``assistant`` line per
# content block, every one repeating the message id, the request id and the usage.
# A resumed session's file starts with copies of the earlier session's lines (same
# ids), as ``claude --resume`` writes them, so a count not deduplicated across files
# counts them twice.

# Known to hostcore's price table and to ccusage's, plus one neither knows.
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5",
          "claude-opus-4-5-20251101", "claude-sonnet-4-20250514", "claude-3-5-haiku-20241022",
          "local-model-x")


def _line(cwd: str, session: str, uuid: str, ts: str, message: dict[str, Any],
          type_: str, **extra: Any) -> dict[str, Any]:
    return {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": "2.0.61", "gitBranch": "main", "type": type_,
            "message": message, "uuid": uuid, "timestamp": ts, **extra}


def session_lines(cwd: str, session: str, start: float, responses: int,
                  rng: random.Random) -> list[dict[str, Any]]:
    """A session of ``responses`` API responses from ``start`` (epoch seconds), each
    answered over one to three content blocks, with tool calls and their results."""
    lines: list[dict[str, Any]] = []
    moment = start
    for n in range(responses):
        moment += rng.randint(20, 4000)
        ts = dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        lines.append(_line(cwd, session, f"{session}-u{n}", ts,
                           {"role": "user", "content": "please go on"}, "user"))
        model = rng.choice(MODELS)
        big = rng.random() < 0.1  # past the long-context threshold sometimes
        usage = {"input_tokens": rng.randint(1, 5000),
                 "cache_creation_input_tokens": rng.randint(0, 30000),
                 "cache_read_input_tokens": rng.randint(210_000, 400_000) if big
                 else rng.randint(0, 90000),
                 "output_tokens": rng.randint(1, 3000), "service_tier": "standard"}
        blocks = [{"type": "thinking", "thinking": "hmm", "signature": "x"},
                  {"type": "text", "text": "doing it"},
                  {"type": "tool_use", "id": f"toolu_{n}", "name": rng.choice(["Bash", "Edit"]),
                   "input": {"command": "ls"}}][: rng.randint(1, 3)]
        for b, block in enumerate(blocks):
            message = {"id": f"msg_{session}_{n}", "type": "message", "role": "assistant",
                       "model": model, "content": [block], "stop_reason": None,
                       "usage": usage}
            lines.append(_line(cwd, session, f"{session}-a{n}-{b}", ts, message, "assistant",
                               requestId=f"req_{session}_{n}"))
            if b == 0 and len(blocks) > 1 and n % 4 == 0:
                # A subagent's response written between two blocks of this one, as a
                # sidechain's lines can be: this response's usage is on two rows.
                side = {"id": f"msg_{session}_{n}_side", "type": "message",
                        "role": "assistant", "model": MODELS[0],
                        "content": [{"type": "text", "text": "found it"}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 7, "output_tokens": 11,
                                  "cache_creation_input_tokens": 0,
                                  "cache_read_input_tokens": 13}}
                lines.append(_line(cwd, session, f"{session}-side{n}", ts, side, "assistant",
                                   requestId=f"req_{session}_{n}_side", isSidechain=True))
        if blocks[-1]["type"] == "tool_use":
            result = {"role": "user", "content": [{"tool_use_id": f"toolu_{n}",
                                                   "type": "tool_result", "content": "ok",
                                                   "is_error": rng.random() < 0.3}]}
            lines.append(_line(cwd, session, f"{session}-r{n}", ts, result, "user"))
    lines.append({"type": "tools-used", "tools": ["Bash", "Edit"], "sessionId": session})
    lines.append({"type": "cost-state", "sessionId": session, "totalCostUSD": 1.5,
                  "totalAPIDuration": 2740, "totalToolDuration": 780, "totalDuration": 39500,
                  "totalLinesAdded": 12, "totalLinesRemoved": 3, "modelUsage": {}})
    return lines


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")


def write_home(home: Path, projects: dict[str, str], *, seed: int = 7) -> None:
    """Sessions over several days in each of ``projects`` (slug -> directory); the
    last session of each resumes the one before it."""
    rng = random.Random(seed)
    start = 1_764_000_000.0  # late November 2025, so days cross midnight in any zone
    for slug, cwd in projects.items():
        earlier: list[dict[str, Any]] = []
        for s in range(3):
            session = f"{slug.strip('-')}-s{s}"
            lines = session_lines(cwd, session, start + s * 80_000, rng.randint(5, 25), rng)
            if s == 2:
                lines = [*earlier, *lines]  # the resumed session copies the earlier one
            write(home / ".claude" / "projects" / slug / f"{session}.jsonl", lines)
            earlier = [line for line in lines if line.get("cwd")]


# -- tests ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ccusage() -> Path:
    folders = [Path(os.environ[ENV_DIR])] if os.environ.get(ENV_DIR) else []
    folders.append(REPO)
    found = next((f / "node_modules" / ".bin" / "ccusage" for f in folders
                  if (f / "node_modules" / ".bin" / "ccusage").is_file()), None)
    require_tool("ccusage", INSTALL, found=found is not None)
    assert found is not None
    return found


def _env(home: Path, tz: str = "UTC") -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TZ": tz,
            "HOSTCORE_LOAD_PLUGINS": "claude-code"}


def _hostcore(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOSTCORE, "--root", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _ingest(root: Path, home: Path, env: dict[str, str], extra: str = "") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "hostcore.toml").write_text(f'[plugins.claude-code]\nhome = "{home}"\n{extra}')
    done = _hostcore(root, "run", "--once", env=env)
    assert done.returncode == 0, done.stderr


def _usage(root: Path, *args: str, env: dict[str, str]) -> dict[str, Any]:
    done = _hostcore(root, "usage", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _ccusage_daily(ccusage: Path, home: Path, tz: str) -> dict[str, Any]:
    done = subprocess.run([str(ccusage), "daily", "--json", "--offline", "--breakdown"],
                          env={**_env(home, tz), "TZ": tz}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    write_home(folder, {"-work-alpha": str(tmp_path / "work" / "alpha"),
                        "-work-beta": str(tmp_path / "work" / "beta")})
    return folder


@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_tokens_per_day_and_model_equal_ccusage_and_cost_agrees_within_a_percent(
        ccusage, home, tmp_path, tz):
    env = _env(home, tz)
    root = tmp_path / "root"
    _ingest(root, home, env)
    ours = _usage(root, env=env)  # the local zone: TZ
    theirs = _ccusage_daily(ccusage, home, tz)
    assert [e["key"] for e in ours["entries"]] == [d["date"] for d in theirs["daily"]]
    assert len(ours["entries"]) >= 3
    for entry, day in zip(ours["entries"], theirs["daily"], strict=True):
        assert [entry[k] for k in KINDS] == [day[k] for k in CC_KINDS], entry["key"]
        for breakdown in day["modelBreakdowns"]:
            model = entry["models"][breakdown["modelName"]]
            assert [model[k] for k in KINDS] == [breakdown[k] for k in CC_KINDS]
            if breakdown["cost"] > 0:
                assert model["cost_usd"] == pytest.approx(breakdown["cost"], rel=0.01)
            else:  # a model ccusage has no price for: hostcore guesses none either
                assert model["cost_usd"] is None
    assert [ours["totals"][k] for k in KINDS] == [theirs["totals"][k] for k in CC_KINDS]
    assert ours["totals"]["cost_usd"] == pytest.approx(theirs["totals"]["totalCost"], rel=0.01)
    # The same tokens whatever the report is cut by; the text table says the same.
    for by in ("session", "project", "model", "machine"):
        cut = _usage(root, "--by", by, env=env)
        assert [cut["totals"][k] for k in KINDS] == [ours["totals"][k] for k in KINDS]
    assert "local-model-x" in _usage(root, "--by", "model", env=env)["entries"][-1]["key"]


def test_an_unknown_model_shows_its_tokens_and_no_cost_until_the_config_prices_it(
        home, tmp_path):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    (unknown,) = [e for e in _usage(root, "--by", "model", env=env)["entries"]
                  if e["key"] == "local-model-x"]
    assert unknown["input_tokens"] > 0 and unknown["cost_usd"] is None
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n'
        "[plugins.usage.prices.local-model-x]\ninput = 1.0\noutput = 2.0\n")
    (priced,) = [e for e in _usage(root, "--by", "model", env=env)["entries"]
                 if e["key"] == "local-model-x"]
    assert priced["cost_usd"] == pytest.approx(
        (unknown["input_tokens"] * 1.0 + unknown["output_tokens"] * 2.0) / 1e6)


def test_a_response_on_many_lines_and_in_a_resumed_file_counts_once(home, tmp_path):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    first = _usage(root, env=env)["totals"]
    naive = [0, 0, 0, 0]
    for path in home.rglob("*.jsonl"):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            usage = line.get("message", {}).get("usage") if isinstance(
                line.get("message"), dict) else None
            if usage:
                naive = [n + usage.get(k, 0) for n, k in zip(naive, KINDS, strict=True)]
    assert naive[1] > first["output_tokens"]  # the lines repeat responses
    _ingest(root, home, env)  # read again: nothing doubles
    assert _usage(root, env=env)["totals"] == first


def test_days_cut_in_another_zone_move_tokens_between_days_not_the_total(home, tmp_path):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    utc = _usage(root, "--tz", "UTC", env=env)
    tokyo = _usage(root, "--tz", "Asia/Tokyo", env=env)
    assert utc["totals"] == tokyo["totals"]
    assert [e["input_tokens"] for e in utc["entries"]] != [
        e["input_tokens"] for e in tokyo["entries"]]
    day = utc["entries"][1]["key"]
    one = _usage(root, "--tz", "UTC", "--since", day, "--until", day, env=env)
    assert [e["key"] for e in one["entries"]] == [day]
    assert one["totals"]["input_tokens"] == utc["entries"][1]["input_tokens"]


def test_usage_of_a_local_only_directory_never_leaves_summary_lines_included(home, tmp_path):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    alpha = str(tmp_path / "work" / "alpha")
    done = _hostcore(root, "policy", "local-only", alpha, "--force", env=env)
    assert done.returncode == 0, done.stderr
    everything = {e["key"]: e for e in _usage(root, "--by", "project", env=env)["entries"]}
    exportable = {e["key"]: e for e in _usage(root, "--by", "project", "--exportable",
                                                 env=env)["entries"]}
    assert set(everything) == {alpha, str(tmp_path / "work" / "beta")}
    assert set(exportable) == {str(tmp_path / "work" / "beta")}
    # The summary lines (no cwd of their own) are rows of their session's directory,
    # so the seam withholds them with it: the export directory gets none of alpha's.
    out = tmp_path / "export"
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n'
        f'[plugins.directory-destination]\npath = "{out}"\n')
    pushed = _hostcore(root, "export", "--destination", "directory",
                       env={**env, "HOSTCORE_LOAD_PLUGINS": "claude-code,directory-destination"})
    assert pushed.returncode == 0, pushed.stderr
    exported = "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert '"cost-state"' in exported and '"tools-used"' in exported
    assert alpha not in exported and "alpha-s0" not in exported


def test_hostile_usage_fields_are_counted_and_skipped_and_no_total_moves(tmp_path):
    home = tmp_path / "home"
    cwd = str(tmp_path / "work" / "x")

    def assistant(uuid: str, model: Any, usage: dict[str, Any]) -> dict[str, Any]:
        return {"type": "assistant", "cwd": cwd, "sessionId": "s", "uuid": uuid,
                "timestamp": "2025-11-20T10:00:00.000Z", "requestId": f"req_{uuid}",
                "message": {"id": f"msg_{uuid}", "model": model, "usage": usage,
                            "content": [{"type": "text", "text": "x"}]}}

    good = {"input_tokens": 10, "output_tokens": 20, "cache_creation_input_tokens": 30,
            "cache_read_input_tokens": 40}
    write(home / ".claude" / "projects" / "-x" / "s.jsonl", [
        assistant("a", "claude-sonnet-4-5", good),
        assistant("b", "claude-sonnet-4-5", {**good, "input_tokens": "10"}),
        assistant("c", "claude-sonnet-4-5", {**good, "output_tokens": -5}),
        assistant("d", "claude-sonnet-4-5", {**good, "cache_read_input_tokens": 10**30}),
        assistant("e", "claude-\x1b[31msonnet", good),
        assistant("f", ["not", "a", "name"], good),
        assistant("g", "claude-sonnet-4-5", {**good, "input_tokens": 1.5}),
        {"type": "cost-state", "sessionId": "s", "totalAPIDuration": "soon"},
        {"type": "tools-used", "sessionId": "s", "tools": [{"name": "Bash"}]},
    ])
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    report = _usage(root, env=env)
    assert [report["totals"][k] for k in KINDS] == [10, 20, 30, 40]
    assert list(report["entries"][0]["models"]) == ["claude-sonnet-4-5"]
    status = _hostcore(root, "status", "--json", env=env)
    health = json.loads(status.stdout)["components"]["worker"]["ingest"]["sources"]
    assert health["claude-code"]["skipped"] == {"malformed": 8}


def test_session_summary_lines_become_rows_of_counts_in_the_sessions_directory(tmp_path):
    home = tmp_path / "home"
    cwd = str(tmp_path / "work" / "x")
    write(home / ".claude" / "projects" / "-x" / "s.jsonl", [
        {"type": "cost-state", "sessionId": "s", "totalAPIDuration": 1},  # no directory yet
        {"type": "user", "cwd": cwd, "sessionId": "s", "uuid": "u",
         "timestamp": "2025-11-20T10:00:00.000Z", "message": {"role": "user", "content": "hi"}},
        {"type": "api-request-blob", "sessionId": "s", "message": {"content": "secret"}},
        {"type": "tools-used", "tools": ["Bash", "mcp__gh__search"], "sessionId": "s"},
        {"type": "cost-state", "sessionId": "s", "totalCostUSD": 0.5, "totalAPIDuration": 274,
         "totalToolDuration": 78.5, "totalDuration": 3950, "totalLinesAdded": 4,
         "totalLinesRemoved": 1, "modelUsage": {"m": {"inputTokens": 9}}},
    ])
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    store = next(root.rglob("store.sqlite3"))
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT r.ts, s.directory, r.payload FROM evidence r "
                          "JOIN scopes s ON s.id = r.scope ORDER BY r.position").fetchall()
    assert [(ts, d, json.loads(p)) for ts, d, p in rows[1:]] == [
        ("2025-11-20T10:00:00.000000Z", cwd, {"type": "tools-used",
                                               "tools": ["Bash", "mcp__gh__search"]}),
        ("2025-11-20T10:00:00.000000Z", cwd, {"type": "cost-state", "summary": {
            "api_duration_ms": 274, "tool_duration_ms": 78, "duration_ms": 3950,
            "lines_added": 4, "lines_removed": 1}})]
    assert len(rows) == 3 and "secret" not in store.read_bytes().decode(errors="replace")


def test_a_purged_session_takes_its_usage_with_it(home, tmp_path):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    before = {e["key"]: e for e in _usage(root, "--by", "session", env=env)["entries"]}
    done = _hostcore(root, "purge", "--session", "work-alpha-s0", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    after = {e["key"]: e for e in _usage(root, "--by", "session", env=env)["entries"]}
    assert "work-alpha-s0" in before and "work-alpha-s0" not in after
    assert after == {k: v for k, v in before.items() if k != "work-alpha-s0"}


# -- the real Claude Code -------------------------------------------------------------
# Its transcript (offline, against the fake Messages API of conftest.py): the tokens
# and cost per model hostcore reports equal ccusage's for the same folder, and the
# session's cost-state and tools-used lines (no cwd) are rows of its directory,
# withheld with it.


def _run(args: list[str], env: dict[str, str], cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


def test_the_real_transcripts_usage_equals_ccusage_and_its_summaries_are_withheld_with_it(
        claude_code, messages_api, ccusage, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TZ": "UTC",
           "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL":
           messages_api.base_url, "ANTHROPIC_API_KEY": "sk-ant-test",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1", "HOSTCORE_LOAD_PLUGINS": "claude-code"}
    project = tmp_path / "project"
    project.mkdir()
    ran = _run([str(claude_code), "-p", "Say hello with the echo command.",
                "--output-format", "json", "--allowedTools", "Bash(echo:*)"], env, project)
    assert ran.returncode == 0, ran.stderr
    (transcript,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    types = [json.loads(line).get("type") for line in transcript.read_text().splitlines()]
    assert "cost-state" in types and "tools-used" in types

    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(f'[plugins.claude-code]\nhome = "{home}"\n')
    assert _run([HOSTCORE, "--root", str(root), "run", "--once"], env).returncode == 0
    ours = json.loads(_run([HOSTCORE, "--root", str(root), "usage", "--json"], env).stdout)
    theirs = json.loads(_run([str(ccusage), "daily", "--json", "--offline", "--breakdown"],
                             env).stdout)
    (entry,) = ours["entries"]
    (day,) = theirs["daily"]
    assert entry["key"] == day["date"]
    assert [entry[k] for k in KINDS] == [day[k] for k in CC_KINDS]
    assert entry["output_tokens"] > 0
    for breakdown in day["modelBreakdowns"]:
        model = entry["models"][breakdown["modelName"]]
        assert [model[k] for k in KINDS] == [breakdown[k] for k in CC_KINDS]
        assert model["cost_usd"] == pytest.approx(breakdown["cost"], rel=0.01)

    # Local-only: nothing of the session is exportable, its summary lines included.
    assert _run([HOSTCORE, "--root", str(root), "policy", "local-only", str(project)],
                env).returncode == 0
    exportable = json.loads(_run([HOSTCORE, "--root", str(root), "usage", "--json",
                                  "--exportable"], env).stdout)
    assert exportable["entries"] == [] and exportable["totals"]["input_tokens"] == 0
    store = next(root.rglob("store.sqlite3"))
    with sqlite3.connect(store) as db:
        filed = db.execute("SELECT s.directory, r.payload ->> '$.type' FROM evidence r "
                           "JOIN scopes s ON s.id = r.scope WHERE r.payload ->> '$.type' IN "
                           "('cost-state', 'tools-used')").fetchall()
    assert {t for _, t in filed} == {"cost-state", "tools-used"}
    assert {d for d, _ in filed} == {str(project)}


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_the_text_table_fits_the_terminal_and_totals_what_json_totals(home, tmp_path, columns):
    env = _env(home)
    root = tmp_path / "root"
    _ingest(root, home, env)
    done = _hostcore(root, "usage", "--by", "project", env={**env, "COLUMNS": str(columns)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(len(line) <= columns for line in lines), lines
    assert lines[0].startswith("Project")
    total = next(line for line in lines if line.startswith("Total")).split()
    totals = _usage(root, env=env)["totals"]
    if columns >= 80:  # the figures in full
        assert total[1:5] == [f"{totals[k]:,}" for k in KINDS]
    else:  # short ones: 1.0M
        assert total[1] == f"{totals['input_tokens'] / 1e3:.1f}k"
    assert ("Models" in lines[0]) == (columns >= 200)
