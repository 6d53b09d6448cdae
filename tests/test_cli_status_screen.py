"""``hostcore status``: one screen as wide as the terminal, in words rather than
Python reprs, coloured only when asked, and counters that survive the process
that ticked (real subprocesses on a real root with every installed plugin)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from hostcore.cli.render import status_lines

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPRS = re.compile(r"\b(True|False|None)\b|\{'|\['")

# A report as Host.status() builds it: one component of each state, a failed step.
REPORT: dict[str, Any] = {
    "root": "/home/me/.local/share/hostcore",
    "components": {
        "source": {"claude-code": {"available": True, "last_files": 3, "last_rows": 120,
                                   "last_malformed": 0, "last_missing_home": False}},
        "provider": {"gh": {"available": False, "configured": False, "repos": 0,
                            "reason": "no repository to poll: set repos = [\"owner/repo\"] "
                                      "under [plugins.gh]"}},
        "worker": {"ingest": {"available": True,
                              "sources": {"claude-code": {"failures": 0, "last_error": None}}},
                   "export": {"available": True, "error": "OSError: disk full"}},
    },
    "last_tick": {"ok": False, "age_seconds": 125, "duration_ms": 1412, "pending": True,
                  "steps": {"ingest": {"ok": True, "skipped": False, "rows": 120,
                                       "failed": 0},
                            "export": {"ok": False, "skipped": False,
                                       "error": "StepFailed: the destination is full"}}},
    "telemetry": {"sink_failures": {}},
}

AT_100 = [
    "root: /home/me/.local/share/hostcore",
    "source claude-code  ok           last_files 3, last_rows 120",
    "provider gh         unavailable  no repository to poll: set repos = [\"owner/repo\"] under",
    "                                 [plugins.gh]",
    "worker ingest       ok           -",
    "worker export       error        OSError: disk full (fix: hostcore -vv status)",
    "1 unavailable: set what each names in the config (`hostcore config` shows it)",
    "last tick: failed, 2 min ago, 1,412 ms, work pending",
    "  ingest  ok       rows 120",
    "  export  failed   StepFailed: the destination is full",
    "    fix: hostcore -v run --once",
]

AT_80 = [
    "root: /home/me/.local/share/hostcore",
    "source claude-code  ok           last_files 3, last_rows 120",
    "provider gh         unavailable  no repository to poll: set repos =",
    "                                 [\"owner/repo\"] under [plugins.gh]",
    "worker ingest       ok           -",
    "worker export       error        OSError: disk full (fix: hostcore -vv status)",
    "1 unavailable: set what each names in the config (`hostcore config` shows it)",
    "last tick: failed, 2 min ago, 1,412 ms, work pending",
    "  ingest  ok       rows 120",
    "  export  failed   StepFailed: the destination is full",
    "    fix: hostcore -v run --once",
]


def red_green(text: str, state: str) -> str:
    return {"ok": f"<g>{text}</g>", "failed": f"<r>{text}</r>", "error": f"<r>{text}</r>",
            "unavailable": f"<y>{text}</y>"}.get(state, text)


def test_the_screen_is_pinned_at_100_columns():
    assert status_lines(REPORT, 100) == AT_100


def test_the_screen_is_pinned_at_80_columns():
    assert status_lines(REPORT, 80) == AT_80


def test_colour_marks_only_the_states_and_leaves_the_layout_alone():
    for width, plain in ((100, AT_100), (80, AT_80)):
        painted = status_lines(REPORT, width, red_green)
        assert [re.sub(r"</?[gry]>", "", line) for line in painted] == plain
        assert "<y>unavailable</y>" in painted[2] and "<r>error</r>" in painted[5]
        assert painted[-4].startswith("last tick: <r>failed</r>")


def digitless(text: str) -> str:
    return re.sub(r"[\d,]+", "#", text)


def hostcore(root: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    full.pop("NO_COLOR", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=full, timeout=300,
                          stdin=subprocess.DEVNULL)


def ticked_root(tmp_path: Path) -> Path:
    """A root on which every installed plugin ran one `run --once`, reading one
    Claude Code transcript."""
    home, root = tmp_path / "home", tmp_path / "root"
    project = home / ".claude" / "projects" / "-work-repo"
    project.mkdir(parents=True)
    line = {"type": "user", "cwd": str(tmp_path), "sessionId": "s-1", "uuid": "u1",
            "timestamp": "2025-07-28T22:54:41.466Z",
            "message": {"role": "user", "content": "fix the build"}}
    (project / "s-1.jsonl").write_text(json.dumps(line) + "\n")
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n\n[plugins.codex]\nhome = "{home}"\n')
    done = hostcore(root, "run", "--once", env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode in (0, 1), done.stderr
    return root


def test_status_fits_one_screen_at_100_and_80_columns_with_every_plugin(tmp_path):
    root = ticked_root(tmp_path)
    for columns, most in (("100", 40), ("80", 44)):
        done = hostcore(root, "status", env={"COLUMNS": columns})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) <= most, done.stdout
        assert max(len(line) for line in lines) <= int(columns), done.stdout
        assert not REPRS.search(done.stdout), done.stdout
        assert not ANSI.search(done.stdout)  # not a terminal: no colour
        assert any(line.startswith("last tick: ") for line in lines)
        # Every component is on it, by kind and name.
        report = json.loads(hostcore(root, "status", "--json").stdout)
        for kind, section in report["components"].items():
            assert all(any(name in line for line in lines) for name in section), kind


def test_colour_follows_color_and_no_color(tmp_path):
    root = ticked_root(tmp_path)
    before = hostcore(root, "--color", "never", "status").stdout
    always = hostcore(root, "--color", "always", "status").stdout
    assert "\x1b[" in always and "unavailable" in ANSI.sub("", always)
    after = hostcore(root, "--color", "never", "status").stdout
    # Ages move between runs, and an age of 0 is not shown while 1 is: that flip
    # happens at most once, so the coloured screen matches the plain one taken on
    # the same side of it.
    assert digitless(ANSI.sub("", always)) in (digitless(before), digitless(after))
    # NO_COLOR wins over auto only; --color always is the user asking.
    assert not ANSI.search(hostcore(root, "status", env={"NO_COLOR": "1"}).stdout)
    assert ANSI.search(hostcore(root, "--color", "always", "status",
                                env={"NO_COLOR": "1"}).stdout)


def test_json_keeps_every_detail_the_screen_leaves_out(tmp_path):
    root = ticked_root(tmp_path)
    report = json.loads(hostcore(root, "status", "--json").stdout)
    claude = report["components"]["source"]["claude-code"]
    assert {"available", "last_files", "last_rows", "last_malformed"} <= set(claude)
    assert set(report) == {"root", "components", "last_tick", "telemetry"}


def test_source_counters_are_the_last_ticks_in_a_process_that_never_ticked(tmp_path):
    root = ticked_root(tmp_path)
    report = json.loads(hostcore(root, "status", "--json").stdout)
    claude = report["components"]["source"]["claude-code"]
    assert claude["last_files"] >= 1 and claude["last_rows"] == 1, claude
    screen = hostcore(root, "status", env={"COLUMNS": "100"}).stdout
    (line,) = [li for li in screen.splitlines() if li.startswith("source claude-code")]
    assert "last_rows 1" in line
