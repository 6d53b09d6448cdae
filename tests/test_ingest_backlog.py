"""A backlog larger than one batch: each batch is one small transaction, and one
``hostcore run --once`` drains the lot (up to ``[run] drain_seconds``), exiting 0
and saying when work is left for the next run."""

from __future__ import annotations

import json
from pathlib import Path

import hostcore_claude_code.plugin as claude_plugin
import pytest

import hostcore.evidence.plugin as evidence_plugin
from hostcore.evidence import transcripts

LINES = 1_000
BATCH_LINES = 64


def backlog(tmp_path: Path, files: int = 4) -> Path:
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-backlog"
    folder.mkdir(parents=True)
    for n in range(files):
        with (folder / f"s{n}.jsonl").open("w") as handle:
            for i in range(LINES // files):
                handle.write(json.dumps({"type": "user", "cwd": "/w", "sessionId": f"s{n}",
                                         "uuid": f"u{i}",
                                         "timestamp": "2025-07-28T22:54:41.466Z"}) + "\n")
    return home


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of BATCH_LINES lines, and an ingest step that reads one per tick, so
    draining takes many ticks."""
    monkeypatch.setattr(transcripts, "READ_BUDGET_LINES", BATCH_LINES)
    monkeypatch.setattr(evidence_plugin, "INGEST_SLICE_SECONDS", 0.0)


def configure(tmp_path: Path, home: Path, drain_seconds: float) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[run]\ndrain_seconds = {drain_seconds}\n\n[plugins.claude-code]\nhome = "{home}"\n')
    return root


def test_one_run_once_drains_a_backlog_of_many_batches(hostcore_cli, register_plugin,
                                                       tmp_path, small_batches):
    register_plugin(claude_plugin)
    root = configure(tmp_path, backlog(tmp_path), drain_seconds=120)
    result = hostcore_cli("run", "--once", "--json", root=root)
    assert result.exit_code == 0, result.stderr
    ticks = [json.loads(line) for line in result.stdout.splitlines()]
    rows = [next(s for s in t["steps"] if s["name"] == "ingest")["counts"]["rows"]
            for t in ticks]
    assert sum(rows) == LINES
    assert max(rows) <= BATCH_LINES, "one batch per tick, each its own transaction"
    assert len(ticks) >= LINES // BATCH_LINES
    assert not ticks[-1]["pending"] and "still pending" not in result.stderr


def test_a_run_once_out_of_time_exits_0_and_says_work_is_pending(hostcore_cli, register_plugin,
                                                                 tmp_path, small_batches):
    register_plugin(claude_plugin)
    root = configure(tmp_path, backlog(tmp_path), drain_seconds=0)
    first = hostcore_cli("run", "--once", root=root)
    assert first.exit_code == 0, first.stderr
    assert "work is still pending; the next run goes on with it" in first.stderr
    status = json.loads(hostcore_cli("status", "--json", root=root).stdout)
    assert status["last_tick"]["pending"] is True


def test_a_read_holds_at_most_its_line_budget_of_rows(tmp_path, monkeypatch):
    home = backlog(tmp_path, files=1)
    source = transcripts.TranscriptSource(
        name="claude-code", folder=home / ".claude", patterns=("projects/*/*.jsonl",),
        parse=claude_plugin.parse_line, event="claude_code.read", emit=lambda *a, **k: None,
        files=transcripts.JsonlFiles(budget_lines=100))
    cursor, sizes = None, []
    while True:
        batch = source.read(cursor)
        sizes.append(len(batch.rows))
        cursor = batch.cursor
        if not batch.more:
            break
    assert max(sizes) == 100 and sum(sizes) == LINES
