"""Benchmark: transcript ingest against a raw baseline, idle ticks, memory, store growth.

Generates Claude-Code- and Codex-style transcript corpora (half the bytes each, lines
shaped like the real formats, 40 project folders with real ``.git/config`` files),
then measures, each in a child process of its own so its peak RSS is its own:

* raw: read every line, msgspec-decode the fields a source uses, and one
  ``executemany`` of the same columns into a plain table (no index), one
  transaction: the floor any ingest is compared with;
* hostcore: a Host with the claude-code and codex sources draining the corpora as
  ``run --once`` does (ticks while work is pending): rows/s, MB/s, the ratio to
  raw (raw's time over hostcore's for the same lines) by wall clock and by CPU
  time (target >= 0.6x by each), peak RSS; raw and
  hostcore run in interleaved pairs (``--runs``, 5 by default), judged by the
  median ratio; each launch of either measures ``--best-of`` times in its own
  process (3 by default, a fresh table or root each time) and reports the attempt
  that used the least CPU: a neighbour on a shared machine only ever adds time,
  and one launch of a few tenths of a second moved by a fifth from one to the next;
* usage fields: the same sessions and lines again with them (assistant lines
  carrying ``message.usage``, its model and ids, one response in three on two
  lines; one Codex ``event_msg`` in four a ``token_count`` event instead), raw and
  hostcore on each corpus in interleaved runs of four, the raw baseline decoding
  and storing the usage counts too: the ingest/raw ratio by CPU with them against
  the one without (target: usage costs <= 1.10x, i.e. the ratio without is at
  most 1.10x the ratio with), and the CPU a row with them against one without;
* the nothing-new tick: ``host.tick()`` with nothing appended, over 30 files and
  over 2,400 (target <= 10 ms per 1,000 unchanged files);
* 1.7 M tiny Claude Code lines in one file, ingested by one ``run --once``-style
  drain: peak RSS (target < 200 MiB, whatever the line count);
* the store's append rate as it grows (20,000-row batches of transcript-like rows):
  empty, half full and at 2 M rows (10 M with --full), with keys clustered per
  session as transcripts' are and with keys spread at random, with the page cache
  the store sets and with SQLite's default 2 MiB: this shows why appends slow down.

Sizes: 100 MB of transcripts by default, 1 GB with ``--full``, 4 MB with ``--quick``
(which also uses 300 idle files, 50,000 tiny lines and a 60,000-row store).

Usage: ``python benchmarks/ingest.py [--quick | --full] [--mb N] [--runs N] [--dir PATH]
[--ingest-only | --home DIR]`` (``--ingest-only``: the ingest/raw and usage fields'
pairs alone; ``--home DIR``: the ingest/raw pairs alone, on copies of the real
transcripts under ``DIR/.claude/projects`` and ``DIR/.codex/sessions``)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from _figures import spread

PROJECTS = 40
REMOTE = "https://github.com/acme/project-{n}.git"
TINY_LINES = 1_700_000
IDLE_FILES = (30, 2_400)
IDLE_TICKS = 15
APPEND_BATCH = 20_000
TARGET_RATIO = 0.6
TARGET_IDLE_MS_PER_1000 = 10.0
TARGET_TINY_MIB = 200.0
TARGET_USAGE_COST = 1.10

# -- corpora --------------------------------------------------------------------


def project(base: Path, n: int) -> Path:
    """A project folder with a real git config (what the remote lookup reads)."""
    folder = base / "work" / f"project-{n:02d}"
    (folder / ".git").mkdir(parents=True, exist_ok=True)
    (folder / ".git" / "config").write_text(
        '[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n'
        f"\turl = {REMOTE.format(n=n)}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n")
    return folder


def text_of(rng: random.Random) -> str:
    # Most lines are short; some carry a tool's long output.
    size = rng.choice([40, 80, 200, 400, 800, 3_000])
    return "".join(rng.choice("abcdefghij klmnop\n\"\\") for _ in range(size // 4)) * 4


def compact_line(record: dict[str, Any]) -> str:
    """One JSONL line as both clients write it: compact, no spaces after separators."""
    return json.dumps(record, separators=(",", ":")) + "\n"


def claude_usage(line: dict[str, Any], i: int, sid: str) -> None:
    """Give assistant line ``i`` the usage fields Claude Code writes: model, message
    and request ids and the token counts. One response in three is on two lines (as
    Claude Code writes one line per content block), a user line between them; its
    lines carry the same counts. Drawn from a generator of their own, so the corpus
    is otherwise the one without them."""
    response = i - 2 if i % 8 == 4 else i  # assistant lines are the even ones
    numbers = random.Random(response)
    line["message"].update({"id": f"msg_{sid[:8]}_{response}", "model": "claude-sonnet-4-5",
                            "usage": {"input_tokens": numbers.randrange(1, 5_000),
                                      "cache_creation_input_tokens": numbers.randrange(9_000),
                                      "cache_read_input_tokens": numbers.randrange(90_000),
                                      "output_tokens": numbers.randrange(1, 3_000),
                                      "service_tier": "standard"}})
    line["requestId"] = f"req_{sid[:8]}_{response}"


def token_count(i: int, total: list[int]) -> dict[str, Any]:
    """A Codex ``token_count`` payload, the running ``total`` grown by one response."""
    numbers = random.Random(i)
    last = [numbers.randrange(1, 4_000), numbers.randrange(50_000), numbers.randrange(2_000)]
    total[:] = [t + n for t, n in zip(total, last, strict=True)]

    def figure(fresh: int, cached: int, output: int) -> dict[str, int]:
        return {"input_tokens": fresh + cached, "cached_input_tokens": cached,
                "output_tokens": output, "reasoning_output_tokens": 0,
                "total_tokens": fresh + cached + output}

    return {"type": "token_count", "info": {"total_token_usage": figure(*total),
                                            "last_token_usage": figure(*last),
                                            "model_context_window": 272_000}}


def claude_corpus(base: Path, target_bytes: int, rng: random.Random, *,
                  files: int | None = None, usage: bool = False,
                  sessions: int | None = None) -> int:
    """Claude Code sessions under ``base/home/.claude/projects``; returns lines written.
    ``files``: that many sessions of 5 lines; ``sessions``: that many (else until
    ``target_bytes``); ``usage``: assistant lines carry usage fields (see claude_usage)."""
    written = lines = 0
    session = 0
    projects = [project(base, n) for n in range(PROJECTS)]
    limit = files if files is not None else sessions
    while (written < target_bytes if limit is None else session < limit):
        cwd = projects[session % PROJECTS]
        folder = base / "home" / ".claude" / "projects" / str(cwd).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        sid = f"{session:08d}-cafe-4bad-beef-{rng.getrandbits(48):012x}"
        out: list[dict[str, Any]] = []
        for i in range(rng.randrange(20, 400) if files is None else 5):
            if i % 33 == 0:
                out.append({"type": "summary", "summary": "Work in progress", "leafUuid": "x"})
                continue
            role = "user" if i % 2 else "assistant"
            out.append({"parentUuid": None, "isSidechain": False, "userType": "external",
                        "cwd": str(cwd), "sessionId": sid, "version": "2.0.61",
                        "gitBranch": "main", "type": role,
                        "message": {"role": role, "content": text_of(rng)},
                        "uuid": f"{sid[:8]}-{i:04d}-{rng.getrandbits(64):016x}",
                        "timestamp": f"2025-07-28T22:{i // 60 % 60:02d}:{i % 60:02d}."
                                     f"{rng.randrange(1000):03d}Z"})
            if usage and role == "assistant":
                claude_usage(out[-1], i, sid)
        data = "".join(map(compact_line, out)).encode()
        (folder / f"{sid}.jsonl").write_bytes(data)
        written += len(data)
        lines += len(out)
        session += 1
    return lines


def codex_corpus(base: Path, target_bytes: int, rng: random.Random, *,
                 usage: bool = False, sessions: int | None = None) -> int:
    """Codex rollouts under ``base/home/.codex/sessions``; returns lines written.
    ``sessions``: that many (else until ``target_bytes``); ``usage``: one
    ``event_msg`` line in four is a ``token_count`` event instead."""
    written = lines = 0
    session = 0
    while (written < target_bytes if sessions is None else session < sessions):
        n = session % PROJECTS
        cwd = project(base, n)
        day = base / "home" / ".codex" / "sessions" / "2025" / "09" / f"{session % 28 + 1:02d}"
        day.mkdir(parents=True, exist_ok=True)
        sid = f"0199{session:08d}-{rng.getrandbits(64):016x}"
        out: list[dict[str, Any]] = [{
            "timestamp": "2025-09-14T10:00:00.000Z", "type": "session_meta",
            "payload": {"id": sid, "timestamp": "2025-09-14T10:00:00.000Z", "cwd": str(cwd),
                        "originator": "codex_cli_rs", "cli_version": "0.36.0",
                        "instructions": "Be helpful. " * 40,
                        "git": {"commit_hash": "a" * 40, "branch": "main",
                                "repository_url": REMOTE.format(n=n)}}}]
        total = [0, 0, 0]
        for i in range(rng.randrange(20, 400)):
            kind = "turn_context" if i % 50 == 0 else rng.choice(["response_item", "event_msg"])
            payload: dict[str, Any] = (
                {"cwd": str(cwd), "approval_policy": "on-request", "model": "gpt-5"}
                if kind == "turn_context" else
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": text_of(rng)}]})
            if usage and kind == "event_msg" and i % 4 == 1:
                payload = token_count(i, total)
            out.append({"timestamp": f"2025-09-14T10:{i // 60 % 60:02d}:{i % 60:02d}."
                                     f"{rng.randrange(1000):03d}Z",
                        "type": kind, "payload": payload})
        data = "".join(map(compact_line, out)).encode()
        (day / f"rollout-2025-09-14T10-00-00-{sid}.jsonl").write_bytes(data)
        written += len(data)
        lines += len(out)
        session += 1
    return lines


def tiny_corpus(base: Path, lines: int) -> int:
    """One Claude Code file of ``lines`` tiny lines; returns its size in bytes."""
    folder = base / "home" / ".claude" / "projects" / "-tiny"
    folder.mkdir(parents=True)
    path = folder / "tiny.jsonl"
    with path.open("w") as handle:
        for start in range(0, lines, 100_000):
            handle.write("".join(
                f'{{"type":"user","cwd":"/w","sessionId":"t","uuid":"{i}",'
                f'"timestamp":"2025-07-28T22:54:41.466Z"}}\n'
                for i in range(start, min(lines, start + 100_000))))
    return path.stat().st_size


def copy_transcripts(home: Path, into: Path) -> int:
    """Copy the Claude Code and Codex transcripts under ``home`` into ``into`` (the
    same layout), so the benchmark reads copies; returns their lines."""
    lines = 0
    for tree in (Path(".claude", "projects"), Path(".codex", "sessions")):
        if not (home / tree).is_dir():
            continue
        for path in sorted((home / tree).rglob("*.jsonl")):
            if not path.is_file() or path.is_symlink():
                continue
            target = into / path.relative_to(home)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            target.write_bytes(data)
            lines += data.count(b"\n")
    if not lines:
        raise SystemExit(f"no transcripts under {home}/.claude/projects or "
                         f"{home}/.codex/sessions")
    return lines


def count_files(base: Path, agent: str) -> int:
    """How many transcripts of ``agent`` (``.claude``, ``.codex``) are under ``base``."""
    return sum(1 for _ in (base / "home" / agent).rglob("*.jsonl"))


def corpus_bytes(base: Path) -> int:
    return sum(p.stat().st_size for p in (base / "home").rglob("*.jsonl"))


# -- child measurements (each in a process of its own) --------------------------------


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_host(base: Path, root: Path) -> Any:
    import hostcore_claude_code.plugin as claude_plugin
    import hostcore_codex.plugin as codex_plugin

    from hostcore.host import Host

    home = str(base / "home")
    return Host(root=root, plugins=[claude_plugin, codex_plugin], load_entrypoints=False,
                config={"plugins": {"claude-code": {"home": home}, "codex": {"home": home}}},
                env={})


def drain(host: Any) -> tuple[int, int]:
    """Tick while work is pending, as ``run --once`` does; returns (rows, ticks)."""
    from hostcore.tick import drain as drain_ticks

    reports = drain_ticks(host, budget_seconds=86_400)
    assert all(r.ok for r in reports), [r.failed for r in reports]
    return sum(r.count("ingest", "rows") for r in reports), len(reports)


def best_of(measure: Callable[[int], dict[str, Any]], times: int) -> dict[str, Any]:
    """The attempt of ``measure`` (called with 0, 1, ...) that used the least CPU, of
    ``times`` made in this process, with the peak RSS after the first: on a shared
    machine a neighbour only ever adds time, so the least is the run least disturbed
    (as timeit takes its best). Every side of a ratio is measured alike."""
    found = [measure(0)]
    first_peak = peak_rss_mib()
    found += [measure(attempt) for attempt in range(1, times)]
    return {**min(found, key=lambda attempt: float(attempt["cpu"])), "peak_mib": first_peak}


def child_raw(base: Path, db_path: Path, times: int) -> dict[str, Any]:
    """The best of ``times`` :func:`raw_once`, each into a database of its own."""
    return best_of(lambda attempt: raw_once(base, db_path.with_suffix(f".{attempt}.sqlite3")),
                   times)


def raw_once(base: Path, db_path: Path) -> dict[str, Any]:
    """Read lines, decode the fields a source uses (with the sources' own types: a
    Codex header's and a ``token_count`` event's payload too), one executemany of
    the same columns into a plain table; a line's usage counts go in its payload."""
    from hostcore_claude_code.source import ClaudeLine
    from hostcore_codex.source import Payload, RolloutLine, TokenCount

    claude = msgspec.json.Decoder(ClaudeLine)
    codex = msgspec.json.Decoder(RolloutLine)
    header = msgspec.json.Decoder(Payload | None)
    tokens = msgspec.json.Decoder(TokenCount | None)
    encode = msgspec.json.Encoder().encode
    started, used = time.perf_counter(), time.process_time()
    rows: list[tuple[Any, ...]] = []
    for path in sorted((base / "home").rglob("*.jsonl")):
        rollout = path.name.startswith("rollout-")
        with path.open("rb") as handle:
            for line in handle:
                usage: Any = None
                if rollout:
                    record: Any = codex.decode(line)
                    if record.type in ("session_meta", "turn_context"):
                        header.decode(record.payload)
                    elif record.type == "event_msg" and b'"token_count"' in line:
                        event = tokens.decode(record.payload)
                        usage = None if event is None else event.info
                else:
                    record = claude.decode(line)
                    usage = None if record.message is None else record.message.usage
                payload = ('{"type":"' + record.type + '"}' if usage is None else
                           encode({"type": record.type, "usage": usage}).decode())
                rows.append((1, 1, getattr(record, "session_id", "") or "", record.timestamp,
                             "", payload, getattr(record, "uuid", None)))
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE raw (position INTEGER PRIMARY KEY, part INTEGER, scope INTEGER, "
               "session_id TEXT, ts TEXT, git_remote TEXT, payload TEXT, key TEXT)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO raw (part, scope, session_id, ts, git_remote, payload, key) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute("COMMIT")
    db.close()
    seconds, cpu = time.perf_counter() - started, time.process_time() - used
    for leftover in db_path.parent.glob(db_path.name + "*"):
        leftover.unlink()
    return {"seconds": seconds, "cpu": cpu, "rows": len(rows)}


def child_hostcore(base: Path, root: Path, times: int) -> dict[str, Any]:
    """The best of ``times`` :func:`hostcore_once`, each on a root of its own."""
    return best_of(lambda attempt: hostcore_once(base, root / str(attempt)), times)


def hostcore_once(base: Path, root: Path) -> dict[str, Any]:
    host = make_host(base, root)
    try:
        started, used = time.perf_counter(), time.process_time()
        rows, ticks = drain(host)
        seconds, cpu = time.perf_counter() - started, time.process_time() - used
    finally:
        host.close()
    shutil.rmtree(root, ignore_errors=True)
    return {"seconds": seconds, "cpu": cpu, "rows": rows, "ticks": ticks}


def child_idle(base: Path, root: Path) -> dict[str, Any]:
    """A tick, and the ingest step alone, with nothing new; and the floor: one
    ``stat`` of every transcript file, which no skip-by-stat read can go below."""
    from hostcore.evidence.transcripts import ReadCounts, list_files

    host = make_host(base, root)
    try:
        drain(host)
        worker = next(w for w in host.workers if w.name == "ingest")
        ticks, steps, cpu = [], [], []
        for _ in range(IDLE_TICKS):
            started = time.perf_counter()
            report = host.tick()
            ticks.append(time.perf_counter() - started)
            assert report.count("ingest", "rows") == 0
            started, used = time.perf_counter(), time.process_time()
            with host.step_lock():
                worker.run(host)
            steps.append(time.perf_counter() - started)
            cpu.append(time.process_time() - used)
        paths = [path for _, path in list_files(
            base / "home" / ".claude", ("projects/*/*.jsonl",), ReadCounts())]
        floor = []
        for _ in range(IDLE_TICKS):
            started = time.perf_counter()
            for path in paths:
                os.stat(path)
            floor.append(time.perf_counter() - started)
    finally:
        host.close()
    return {"tick_ms": statistics.median(ticks) * 1000,
            "step_ms": statistics.median(steps) * 1000,
            "step_cpu_ms": statistics.median(cpu) * 1000,
            "stat_floor_ms": statistics.median(floor) * 1000}


def child_tiny(base: Path, root: Path) -> dict[str, Any]:
    host = make_host(base, root)
    try:
        started = time.perf_counter()
        rows, ticks = drain(host)
        seconds = time.perf_counter() - started
    finally:
        host.close()
    return {"seconds": seconds, "rows": rows, "ticks": ticks, "peak_mib": peak_rss_mib()}


def child_append(db_path: Path, rows: int, cache: str, keys: str = "random") -> dict[str, Any]:
    """Append rates (rows/s of CPU over a few batches) as the store grows to ``rows``.

    ``keys``: ``session`` keys share a prefix per 300 rows, as transcript keys
    (``<session>:<uuid>``) do; ``random`` keys are spread over the whole index.
    """
    import hostcore.evidence.store as store_module
    from hostcore.evidence.store import EvidenceRow, Store

    if cache == "sqlite-default":
        store_module.WRITER_CACHE_KIB = 2_000
    store = Store(db_path)
    rng = random.Random(7)
    marks = sorted({0, rows // 2, rows})
    rates: dict[int, float] = {}
    filled = 0

    def key(n: int) -> str:
        if keys == "session":  # sessions start in random order, lines follow in each
            return f"{(n // 300) * 2654435761 % 2**32:08x}-cafe:{rng.getrandbits(64):016x}"
        return f"{rng.getrandbits(64):016x}:{rng.getrandbits(64):016x}"

    def batch() -> list[EvidenceRow]:
        return [EvidenceRow(partition="claude-code", source_id="claude-code",
                            session_id=f"s-{(filled + n) // 300}",
                            ts="2025-07-28T22:54:41.466Z",
                            directory=f"/work/project-{rng.randrange(PROJECTS)}",
                            git_remote=REMOTE.format(n=rng.randrange(PROJECTS)),
                            payload={"type": "user", "branch": "main"},
                            key=key(filled + n))
                for n in range(APPEND_BATCH)]

    try:
        for mark in marks:
            while filled < mark:
                store.append(batch())
                filled += APPEND_BATCH
            measured = []
            for _ in range(3):
                measured.append(batch())
                filled += APPEND_BATCH
            started = time.process_time()
            for rows_ in measured:
                store.append(rows_)
            rates[mark] = 3 * APPEND_BATCH / (time.process_time() - started)
    finally:
        store.close()
    return {"rates": rates, "bytes": db_path.stat().st_size}


CHILDREN = {"idle": child_idle, "tiny": child_tiny}
# The children measured as the best of a few attempts (--best-of).
BEST_OF = {"raw": child_raw, "hostcore": child_hostcore}


def run_child(mode: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", mode, *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the run ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 MB, 50,000 tiny lines")
    parser.add_argument("--full", action="store_true", help="1 GB, a 10 M-row store")
    parser.add_argument("--mb", type=float, default=None, help="corpus size in MB")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (a temp dir)")
    parser.add_argument("--runs", type=int, default=None,
                        help="interleaved raw/hostcore pairs, judged by the median ratio "
                             "(default 5, 1 with --quick)")
    parser.add_argument("--ingest-only", action="store_true",
                        help="only the ingest/raw pairs and the usage fields' pairs")
    parser.add_argument("--best-of", type=int, default=None,
                        help="attempts each raw and hostcore launch makes in-process, the "
                             "least CPU kept (default 3, 1 with --quick)")
    parser.add_argument("--home", type=Path, default=None,
                        help="measure the ingest/raw pairs on this home folder's own "
                             "transcripts (its .claude/projects and .codex/sessions, "
                             "copied first, never read in place) instead of a generated "
                             "corpus; nothing else is measured")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, *rest = args.child
        if mode == "append":
            result = child_append(Path(rest[0]), int(rest[1]), *rest[2:])
        else:
            result = (CHILDREN[mode](*map(Path, rest)) if mode not in BEST_OF
                      else BEST_OF[mode](Path(rest[0]), Path(rest[1]), int(rest[2])))
        print(json.dumps(result))
        return 0

    mb = args.mb or (4 if args.quick else 1_000 if args.full else 100)
    args.runs = args.runs or (1 if args.quick else 5)
    best = str(args.best_of or (1 if args.quick else 3))
    tiny = 50_000 if args.quick else TINY_LINES
    store_rows = 60_000 if args.quick else 10_000_000 if args.full else 2_000_000
    idle_files = (30, 300) if args.quick else IDLE_FILES
    work = Path(tempfile.mkdtemp(prefix="hostcore-ingest-bench-", dir=args.dir))
    rng = random.Random(17)
    try:
        corpus = work / "corpus"
        started = time.perf_counter()
        if args.home is not None:
            lines = copy_transcripts(args.home, corpus / "home")
        else:
            lines = claude_corpus(corpus, int(mb * 1e6 / 2), rng)
            lines += codex_corpus(corpus, int(mb * 1e6 / 2), rng)
        size = corpus_bytes(corpus)
        files = sum(1 for _ in (corpus / "home").rglob("*.jsonl"))
        print(f"corpus: {size / 1e6:,.1f} MB, {lines:,} lines in {files:,} files "
              f"(built in {time.perf_counter() - started:.1f} s)")

        # Interleaved pairs, judged by the median ratio: this kind of machine is
        # noisy, and a single pair moves by a tenth from one run to the next.
        pairs = []
        for run in range(args.runs):
            raw = run_child("raw", str(corpus), str(work / f"raw-{run}.sqlite3"), best)
            ours = run_child("hostcore", str(corpus), str(work / f"root-{run}"), best)
            shutil.rmtree(work / f"root-{run}", ignore_errors=True)
            for leftover in work.glob(f"raw-{run}.sqlite3*"):
                leftover.unlink()
            # Both read the same lines: the ratio is of their times. A rate of rows
            # would charge hostcore for the lines it rightly stores no row for (a
            # real transcript's request records), which raw stores all the same.
            wall = raw["seconds"] / ours["seconds"]
            cpu = raw["cpu"] / ours["cpu"]
            pairs.append((wall, cpu, raw, ours))
            if args.runs > 1:
                print(f"  run {run + 1}: raw {raw['seconds']:.2f} s, hostcore "
                      f"{ours['seconds']:.2f} s ({ours['cpu']:.2f} s CPU): {wall:.2f}x")
        wall, _, raw, ours = sorted(pairs, key=lambda pair: pair[0])[len(pairs) // 2]
        cpu = statistics.median(pair[1] for pair in pairs)
        for name, found in (("raw baseline", raw), ("hostcore", ours)):
            print(f"{name + ':':13} {found['rows']:>10,} rows in {found['seconds']:6.2f} s "
                  f"({found['cpu']:.2f} s CPU) = {found['rows'] / found['seconds']:>9,.0f} "
                  f"rows/s, {size / 1e6 / found['seconds']:6.1f} MB/s; by CPU "
                  f"{found['rows'] / found['cpu']:>9,.0f} rows/s, "
                  f"{size / 1e6 / found['cpu']:6.1f} MB/s; peak RSS {found['peak_mib']:.0f} MiB"
                  + (f", {found['ticks']} tick(s)" if "ticks" in found else ""))
        # Judged by wall clock, what a user waits for, and by CPU time, which a busy
        # machine moves least (issue 32): both medians must reach the target.
        met = wall >= TARGET_RATIO and cpu >= TARGET_RATIO
        print(f"ingest/raw: {wall:.2f}x lines/s by wall clock, the median of {len(pairs)} "
              f"run(s) (min {min(p[0] for p in pairs):.2f}x, max {max(p[0] for p in pairs):.2f}x), "
              f"{cpu:.2f}x by CPU time (min {min(p[1] for p in pairs):.2f}x, max "
              f"{max(p[1] for p in pairs):.2f}x); target >= {TARGET_RATIO}x by each "
              f"{'PASS' if met else 'MISS'}")

        if args.home is not None:
            return 0

        # The same sessions and lines with usage fields, against the ones without:
        # raw and hostcore on each, interleaved. Built from the same seed.
        with_usage = work / "corpus-usage"
        same = random.Random(17)
        usage_lines = claude_corpus(with_usage, 0, same, usage=True,
                                    sessions=count_files(corpus, ".claude"))
        usage_lines += codex_corpus(with_usage, 0, same, usage=True,
                                    sessions=count_files(corpus, ".codex"))
        print(f"corpus with usage fields: {corpus_bytes(with_usage) / 1e6:,.1f} MB, "
              f"{usage_lines:,} lines")
        runs: list[dict[str, dict[str, Any]]] = []
        for run in range(args.runs):
            found = {}
            for name, folder in (("plain", corpus), ("usage", with_usage)):
                found[f"raw-{name}"] = run_child("raw", str(folder),
                                                 str(work / f"raw-{name}-{run}.sqlite3"), best)
                found[name] = run_child("hostcore", str(folder), str(work / f"{name}-{run}"),
                                        best)
                shutil.rmtree(work / f"{name}-{run}", ignore_errors=True)
                for leftover in work.glob(f"raw-{name}-{run}.sqlite3*"):
                    leftover.unlink()
            runs.append(found)

        def per_row(found: dict[str, Any], clock: str) -> float:
            return float(found[clock]) / int(found["rows"])

        # The ingest ratio (hostcore's time a row over raw's) with usage fields over
        # the one without: what the fields cost hostcore beyond what reading and
        # storing them costs at all. By CPU time (both threads), which a loaded
        # machine moves least; by wall clock as well.
        def cost(found: dict[str, dict[str, Any]], clock: str) -> float:
            return ((per_row(found["usage"], clock) / per_row(found["raw-usage"], clock))
                    / (per_row(found["plain"], clock) / per_row(found["raw-plain"], clock)))

        def ingest_raw(found: dict[str, dict[str, Any]], name: str) -> float:
            return per_row(found[f"raw-{name}"], "cpu") / per_row(found[name], "cpu")

        costs = [cost(found, "cpu") for found in runs]
        walls = [cost(found, "seconds") for found in runs]
        rows_cpu = [per_row(found["usage"], "cpu") / per_row(found["plain"], "cpu")
                    for found in runs]
        raw_rows = [per_row(found["raw-usage"], "cpu") / per_row(found["raw-plain"], "cpu")
                    for found in runs]
        judged = statistics.median(costs)
        print(f"usage fields: the ingest ratio by CPU without them is {judged:.2f}x the one "
              f"with them, the median of {len(costs)} run(s) (min {min(costs):.2f}x, max "
              f"{max(costs):.2f}x; target <= {TARGET_USAGE_COST:.2f}x) "
              f"{'PASS' if judged <= TARGET_USAGE_COST else 'MISS'}; by wall clock "
              f"{spread(walls, '.2f', 'x')}; ingest/raw by CPU with them "
              f"{statistics.median(ingest_raw(found, 'usage') for found in runs):.2f}x, "
              f"without {statistics.median(ingest_raw(found, 'plain') for found in runs):.2f}x; "
              f"CPU a row with them {spread(rows_cpu, '.2f', 'x')} the one without (raw's "
              f"{spread(raw_rows, '.2f', 'x')}); "
              f"load average {os.getloadavg()[0]:.1f}")
        if args.ingest_only:
            return 0

        for count in idle_files:
            idle = work / f"idle-{count}"
            claude_corpus(idle, 1 << 62, random.Random(count), files=count)
            found = run_child("idle", str(idle), str(work / f"idle-root-{count}"))
            per_1000 = found["step_ms"] * 1000 / count
            cpu_1000 = found["step_cpu_ms"] * 1000 / count
            verdict = ("PASS" if cpu_1000 <= TARGET_IDLE_MS_PER_1000 else "MISS"
                       ) if count >= 1000 else "(too few files to judge per 1,000)"
            print(f"nothing-new tick over {count:,} files: tick {found['tick_ms']:.2f} ms, "
                  f"ingest step {found['step_ms']:.2f} ms wall / {found['step_cpu_ms']:.2f} ms "
                  f"CPU = {per_1000:.2f} / {cpu_1000:.2f} ms per 1,000 files (target <= "
                  f"{TARGET_IDLE_MS_PER_1000:g} by CPU) {verdict}; ratio to a bare stat of "
                  f"each file {found['step_ms'] / found['stat_floor_ms']:.2f}x")

        tiny_dir = work / "tiny"
        tiny_size = tiny_corpus(tiny_dir, tiny)
        found = run_child("tiny", str(tiny_dir), str(work / "tiny-root"))
        verdict = "PASS" if found["peak_mib"] < TARGET_TINY_MIB else "MISS"
        print(f"{tiny:,} tiny lines ({tiny_size / 1e6:.0f} MB): {found['rows']:,} rows in "
              f"{found['seconds']:.1f} s, {found['ticks']} tick(s), peak RSS "
              f"{found['peak_mib']:.0f} MiB (target < {TARGET_TINY_MIB:g}) {verdict}")

        for keys, cache in (("session", "store"), ("random", "store"),
                            ("random", "sqlite-default")):
            path = work / f"append-{keys}-{cache}.sqlite3"
            grown = run_child("append", str(path), str(store_rows), cache, keys)
            rates = {int(k): v for k, v in grown["rates"].items()}
            first = rates[0]
            shown = ", ".join(f"{rows / 1e6:g} M rows: {rate:,.0f} rows/s "
                              f"({first / rate:.2f}x slower)" if rows else
                              f"empty: {rate:,.0f} rows/s" for rows, rate in rates.items())
            print(f"append as the store grows ({keys} keys, {cache} page cache; by CPU): "
                  f"{shown}; file {grown['bytes'] / 1e6:,.0f} MB")
            for leftover in work.glob(f"{path.name}*"):
                leftover.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HOSTCORE_LOAD_PLUGINS", "")
    raise SystemExit(main())
