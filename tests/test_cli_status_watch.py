"""``hostcore status --watch``: a live view redrawn in place in a pseudo-terminal
while real ``hostcore run`` processes tick beside it, and plain blocks of lines on
a pipe. Every wait is on output (pexpect's expect, a pipe's readline) with a
generous timeout, never on a sleep: the machine running this may be loaded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pexpect
import pytest

from hostcore.cli.watch import ENTER, RESTORE

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WAIT = 240  # seconds: generous, for a loaded 2-core machine
HEADLINE = "hostcore status --watch: every "


def environment() -> dict[str, str]:
    """This environment without hostcore's variables or a size that would hide the pty's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HOSTCORE_") and k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm"
    return env


def transcript_line(tmp_path: Path, n: int) -> str:
    return json.dumps({"type": "user", "cwd": str(tmp_path), "sessionId": "s-1",
                       "uuid": f"u{n}", "timestamp": f"2025-07-28T22:54:{n % 60:02}.466Z",
                       "message": {"role": "user", "content": f"step {n}"}}) + "\n"


class Root:
    """A root whose Claude Code source reads a transcript the test appends to."""

    def __init__(self, tmp_path: Path) -> None:
        home = tmp_path / "home"
        self.tmp_path, self.path = tmp_path, tmp_path / "root"
        self.transcript = home / ".claude" / "projects" / "-work-repo" / "s-1.jsonl"
        self.transcript.parent.mkdir(parents=True)
        self.transcript.touch()
        self.lines = 0
        self.path.mkdir(mode=0o700)
        # A long interval: each `hostcore run` ticks once, then waits for its signal.
        (self.path / "hostcore.toml").write_text(
            f'[run]\ninterval_seconds = 3600\n\n[plugins.claude-code]\nhome = "{home}"\n\n'
            f'[plugins.codex]\nhome = "{home}"\n')

    def append(self, count: int) -> None:
        with self.transcript.open("a") as handle:
            for _ in range(count):
                self.lines += 1
                handle.write(transcript_line(self.tmp_path, self.lines))

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "hostcore", "--root", str(self.path), *args]

    # A step of some plugin may fail where a tool it uses is missing (exit 1): the view
    # shows it, and what these tests look at (ticks, rows in) is there all the same.
    def run_once(self) -> None:
        done = subprocess.run(self.command("run", "--once"), capture_output=True, text=True,
                              env=environment(), timeout=WAIT, stdin=subprocess.DEVNULL)
        assert done.returncode in (0, 1), done.stderr

    def tick_in_a_running_run(self) -> None:
        """Start `hostcore run`, wait for its first tick's line, then end it.

        SIGKILL, not SIGINT: the tick's report is kept before its line is printed,
        and every state write survives a SIGKILL; a SIGINT to a run waiting out a
        long interval was once seen to go unanswered under load (a hostcore run
        question of its own, not this view's)."""
        run = subprocess.Popen(self.command("run"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=environment(),
                               stdin=subprocess.DEVNULL)
        # Should the tick never come, the read below ends with the process.
        watchdog = threading.Timer(WAIT, run.kill)
        watchdog.start()
        try:
            assert run.stderr is not None
            for line in run.stderr:  # blocks until the line comes: no sleep
                if line.startswith("tick "):
                    break
            else:
                pytest.fail(f"`hostcore run` ended before a tick: {run.wait()}")
        finally:
            watchdog.cancel()
            run.kill()
            run.wait()
            if run.stderr is not None:
                run.stderr.close()


def frames(output: str) -> list[list[str]]:
    """Each complete redraw in ``output`` as the lines a person sees (no escapes)."""
    drawn = []
    for chunk in output.split("\x1b[H")[1:]:
        if "\x1b[J" not in chunk:
            continue  # still being written
        text = chunk.split("\x1b[J")[0]
        # The pty's own output processing may add a \r to the view's \r\n.
        drawn.append([ANSI.sub("", line).rstrip("\r") for line in text.split("\n")])
    return drawn


def expect_frame_with(child: pexpect.spawn, text: str) -> list[str]:
    """Wait until a complete frame shows ``text``; that frame's lines."""
    child.expect(re.escape(text) + r"[^\x1b]*\x1b\[K", timeout=WAIT)
    child.expect_exact("\x1b[J", timeout=WAIT)
    return frames(child.logfile_read.getvalue())[-1]


class Log:
    """Keeps what the pty said, for frames() (pexpect's logfile_read)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        return "".join(self.parts)


def spawn(root: Root, dimensions: tuple[int, int], *args: str) -> pexpect.spawn:
    """`hostcore status --watch` in a pseudo-terminal of ``dimensions`` (rows, columns)."""
    command = root.command("status", "--watch", *args)
    child = pexpect.spawn(command[0], command[1:], env=environment(), dimensions=dimensions,
                          encoding="utf-8", timeout=WAIT)
    child.logfile_read = Log()
    return child


def assert_fits(frame: list[str], rows: int, columns: int) -> None:
    assert len(frame) <= rows, frame
    assert all(len(line) <= columns for line in frame), \
        [line for line in frame if len(line) > columns]


@pytest.mark.parametrize(("rows", "columns"), [(24, 80), (40, 100)])
def test_the_live_view_redraws_after_each_tick_fits_the_pty_and_ctrl_c_restores_it(
        tmp_path, rows, columns):
    root = Root(tmp_path)
    root.append(1)
    root.run_once()
    child = spawn(root, (rows, columns), "--interval", "0.2")
    try:
        child.expect_exact(ENTER, timeout=WAIT)
        first = expect_frame_with(child, "ticks seen 0 | rows in 1,")
        assert first[0].startswith(HEADLINE)
        assert_fits(first, rows, columns)

        # A `hostcore run` ticks beside the view (the view holds no lock it needs).
        root.append(2)
        root.tick_in_a_running_run()
        second = expect_frame_with(child, "ticks seen 1 | rows in 2,")
        assert_fits(second, rows, columns)
        root.append(3)
        root.tick_in_a_running_run()
        third = expect_frame_with(child, "ticks seen 2 | rows in 3,")
        assert_fits(third, rows, columns)
        assert third != first

        # A narrower terminal: the next frames are redrawn to its width (SIGWINCH).
        # Frames drawn before it may still be on their way: wait for the first one
        # drawn at 60 columns (a wider one has longer lines), then for two more.
        child.setwinsize(rows, 60)
        narrow = None
        while narrow is None:
            child.expect_exact("\x1b[J", timeout=WAIT)
            drawn = frames(child.logfile_read.getvalue())
            narrow = next((at for at, f in enumerate(drawn)
                           if at > 0 and max(map(len, f)) <= 60), None)
        for _ in range(2):
            child.expect_exact("\x1b[J", timeout=WAIT)
        for frame in frames(child.logfile_read.getvalue())[narrow:]:
            assert_fits(frame, rows, 60)

        child.sendintr()
        child.expect(pexpect.EOF, timeout=WAIT)
    finally:
        child.close(force=True)
    assert (child.exitstatus, child.signalstatus) == (0, None)
    assert child.logfile_read.getvalue().endswith(RESTORE)


def test_a_short_terminal_shows_what_fits_and_says_how_much_is_left_out(tmp_path):
    root = Root(tmp_path)
    root.run_once()
    child = spawn(root, (8, 80))
    try:
        frame = expect_frame_with(child, "more lines (a taller terminal shows them)")
        assert len(frame) == 8 and frame[0].startswith(HEADLINE)
        child.kill(signal.SIGTERM)  # the other stop signal restores the terminal too
        child.expect(pexpect.EOF, timeout=WAIT)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert child.logfile_read.getvalue().endswith(RESTORE)


def root_files(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size, but SQLite's own -wal/-shm files."""
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_on_a_pipe_each_refresh_is_a_block_of_plain_lines_and_nothing_is_written(tmp_path):
    root = Root(tmp_path)
    root.append(1)
    root.run_once()
    before = root_files(root.path)
    env = {**environment(), "COLUMNS": "80"}
    watch = subprocess.Popen(root.command("status", "--watch", "--interval", "0.2"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    try:
        assert watch.stdout is not None
        for line in watch.stdout:  # blocks until a line comes: no sleep
            lines.append(line.rstrip("\n"))
            if sum(li.startswith(HEADLINE) for li in lines) == 3:
                break
        assert root_files(root.path) == before  # three refreshes wrote nothing
        watch.send_signal(signal.SIGINT)
        rest, err = watch.communicate(timeout=WAIT)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0, err
    text = "\n".join([*lines, rest])
    assert "\x1b" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    # The first two blocks, read whole before the third began (the rest of the
    # third may have stayed in the pipe's reader when the signal went).
    blocks = "\n".join(lines).split(HEADLINE)[1:3]
    assert len(blocks) == 2
    for block in blocks:
        assert "\nticks seen 0 | rows in 1," in block and "\nlast tick: " in block, block


FAULTY_WORKERS = """
    from hostcore import hookimpl
    from hostcore.plugin.registration import WorkerResult

    class Stuck:
        name = "stuck"

        def run(self, host):
            raise RuntimeError("stuck cannot run")

        def status(self):
            raise RuntimeError("stuck cannot say")

    class Busy:
        name = "busy"

        def run(self, host):
            return WorkerResult(pending=True, counts={"done": 1})

    @hookimpl
    def hostcore_workers(host):
        return [Stuck(), Busy()]
"""


def test_the_view_counts_failed_steps_component_errors_and_names_the_backlog(
        tmp_path, fake_site):
    fake_site.add("fake-faulty", {"faulty": FAULTY_WORKERS})
    root = Root(tmp_path)
    env = {**environment(), "PYTHONPATH": str(fake_site.folder), "COLUMNS": "100",
           "HOSTCORE_LOAD_PLUGINS": "fake-faulty"}
    ran = subprocess.run(root.command("run", "--once"), capture_output=True, text=True,
                         env=env, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert ran.returncode == 1, ran.stderr  # stuck failed: the drain stops at once
    watch = subprocess.Popen(root.command("status", "--watch", "--interval", "0.2"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    try:
        assert watch.stdout is not None
        for line in watch.stdout:
            if line.startswith(HEADLINE) and lines:
                break  # the first block is whole
            lines.append(line.rstrip("\n"))
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=WAIT)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0, err
    assert lines[1] == "ticks seen 0 | rows in 0, out 0 | backlog: busy | failed steps 1 | errors 1"
    (stuck,) = [line for line in lines if line.startswith("worker stuck")]
    assert "error" in stuck and "RuntimeError: stuck cannot say" in stuck


@pytest.mark.parametrize("args", [["status", "--interval", "1"],
                                  ["status", "--watch", "--json"]])
def test_interval_without_watch_and_watch_with_json_are_usage_errors(hostcore_cli, args):
    result = hostcore_cli(*args)
    assert result.exit_code == 2
    assert "--watch" in result.stderr
