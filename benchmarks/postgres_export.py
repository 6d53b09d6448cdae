"""Export throughput into PostgreSQL, against a raw psycopg COPY of the same rows.

Starts a throwaway PostgreSQL server from the machine's binaries (fsync on, the
defaults of a real server; Unix socket only), builds a store of permitted rows,
and in the same run measures:

1. raw: the same rows, read once from the seam into memory, COPYed (binary) by
   psycopg into an identical table, one transaction per 10,000 rows (the baseline),
   and the same COPY into the destination's own table, whose guards (schema
   version 2: the trigger checking each row's origin, the per-push audit) are
   what isolating machines costs;
2. export: ``Exporter.run()`` (the engine of ``hostcore export``) pushing every row
   into empty tables, as rows/s and as a ratio to (1). Goal >= 0.5x. Then what
   the rows take on disk, and the same rows INSERTed by psycopg's pipelined
   ``executemany`` instead of COPY (why the destination uses COPY);
3. memory: ``hostcore export`` as a real process at two sizes (100,000 and
   1,000,000 rows); its peak RSS at each, and their ratio (flat: about 1.0x);
4. fleet: 4 hosts (processes, stores of their own) exporting at once into one
   database, their aggregate rate against one host exporting alone.

(1) and (2) run ``--repeat`` times, alternating; the best of each is kept.

    python benchmarks/postgres_export.py            # 200,000 rows; memory at 100k and 1M
    python benchmarks/postgres_export.py --quick    # 10,000 rows; memory at 5k and 50k
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hostcore_postgres.plugin as postgres_plugin
import psycopg
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.local_server import LocalServer, find_binaries
from psycopg import pq
from psycopg.adapt import Dumper

from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import EXPORT_COLUMNS, ExportBatch
from hostcore.export.exporter import BATCH_ROWS, Exporter
from hostcore.host import Host

DIRECTORIES = 50
SOURCES = ("claude", "codex", "other")
HOSTS = 4
COPY_COLUMNS = ("stream, origin, position, partition, source_id, session_id, ts, directory, "
                "git_remote, payload, key")
COPY_TYPES = ["text", "text", "int8", "text", "text", "text", "text", "text", "text", "json",
              "text"]


class RawJson(Dumper):
    """Sends a payload's JSON bytes as they are: the fastest way psycopg offers."""

    oid = 114  # json
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


def build_store(root: Path, rows: int, config: str) -> str:
    """A store of ``rows`` permitted rows; returns its origin."""
    root.mkdir(parents=True)
    host = Host(root=root, load_entrypoints=False, env={})
    try:
        host.store.append(
            EvidenceRow(partition="sessions", source_id=SOURCES[i % len(SOURCES)],
                        session_id=f"s{i // 500}", ts="2024-05-01T10:00:00Z",
                        directory=f"/work/project-{i % DIRECTORIES}",
                        git_remote=f"git@github.com:org/repo-{i % 97}.git",
                        payload={"n": i, "kind": "message", "text": "lorem ipsum " * 6})
            for i in range(rows))
        origin = host.store.instance_id
    finally:
        host.close()
    (root / "hostcore.toml").write_text(config)
    return origin


def reset(dsn: str) -> None:
    """Empty tables: the export's schema (created once, by the first export) and raw's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS raw CASCADE")
        conn.execute("DO $$ BEGIN IF to_regclass('hostcore.rows') IS NOT NULL THEN "
                     "TRUNCATE hostcore.rows, hostcore.refs, hostcore.pushes, "
                     "hostcore.origins; END IF; END $$")
        conn.execute("CHECKPOINT")


def create_schema(dsn: str) -> None:
    """The destination's schema, created as a first push would, before anything is timed."""
    destination = PostgresDestination(dsn)
    try:
        destination.push(ExportBatch(stream="main", origin="bench", rows=[]))
    finally:
        destination.close()


def forget(root: Path) -> None:
    (root / "cache" / "refs.json").unlink(missing_ok=True)


def raw_table(conn: psycopg.Connection[Any]) -> None:
    """raw.rows: the destination's rows table, by hand."""
    conn.execute("CREATE SCHEMA raw")
    conn.execute("CREATE TABLE raw.rows (stream text NOT NULL, origin text NOT NULL, "
                 "position bigint NOT NULL, partition text NOT NULL, source_id text NOT "
                 "NULL, session_id text NOT NULL, ts text NOT NULL, directory text NOT "
                 "NULL, git_remote text NOT NULL, payload json NOT NULL, key text, "
                 "pushed_at timestamp with time zone NOT NULL DEFAULT now(), "
                 "PRIMARY KEY (stream, origin, position))")
    conn.execute("CREATE INDEX ON raw.rows USING brin (pushed_at)")
    conn.commit()


def raw_rate(dsn: str, rows: list[tuple[Any, ...]], *, guarded: bool = False) -> float:
    """Seconds psycopg takes to COPY ``rows`` (binary, 10,000 per transaction) into a
    plain copy of the rows table, or (``guarded``) into the destination's own."""
    reset(dsn)
    with psycopg.connect(dsn) as conn:
        conn.adapters.register_dumper(None, RawJson)
        raw_table(conn)
        table = "raw.rows"
        if guarded:  # the origin claimed by this role, as its first push would
            table = "hostcore.rows"
            conn.execute("SELECT hostcore.claim_origin(%s)", (rows[0][1],))
            conn.commit()
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH_ROWS):
            with conn.cursor() as cursor, cursor.copy(
                    f"COPY {table} ({COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(COPY_TYPES)
                for row in rows[start:start + BATCH_ROWS]:
                    copy.write_row(row)
            conn.commit()
        return time.perf_counter() - started


def insert_rate(dsn: str, rows: list[tuple[Any, ...]]) -> float:
    """Seconds psycopg takes to INSERT ``rows`` with executemany (pipeline mode),
    10,000 per transaction: the alternative to COPY."""
    reset(dsn)
    with psycopg.connect(dsn) as conn:
        raw_table(conn)
        text_rows = [(*row[:9], row[9].decode(), row[10]) for row in rows]
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH_ROWS):
            with conn.cursor() as cursor:
                cursor.executemany(f"INSERT INTO raw.rows ({COPY_COLUMNS}) VALUES "
                                   "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s)",
                                   text_rows[start:start + BATCH_ROWS])
            conn.commit()
        return time.perf_counter() - started


def export_rate(root: Path, dsn: str) -> tuple[int, float]:
    reset(dsn)
    forget(root)
    host = Host(root=root, plugins=[postgres_plugin], load_entrypoints=False, env={})
    try:
        (destination,) = host.destinations
        started = time.perf_counter()
        summary = Exporter(host, destination).run()
        return summary.rows, time.perf_counter() - started
    finally:
        host.close()


def seam_rows(root: Path, origin: str) -> list[tuple[Any, ...]]:
    """The rows the export would push, as COPY tuples (read once, untimed)."""
    host = Host(root=root, load_entrypoints=False, env={}, config={})
    try:
        return [("main", origin, position, partition, source_id, session_id, ts, directory,
                 git_remote, payload.encode(), key)
                for position, partition, source_id, session_id, ts, directory, git_remote,
                payload, key in host.seam.read_rows_since_sync(None, 0, EXPORT_COLUMNS)]
    finally:
        host.close()


# ``hostcore export`` as a real process that reports its own peak RSS (VmHWM) on
# exit: ru_maxrss of a child would carry over this (large) process's peak, since
# Linux keeps it across fork and exec.
_CLI = """
import atexit, sys
from hostcore.__main__ import main
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("peak-kib", line.split()[1], file=sys.stderr)
atexit.register(peak)
main(["export", "-d", "postgres"])
"""


def cli_export(root: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HOSTCORE_ROOT": str(root),
           "HOSTCORE_LOAD_PLUGINS": "postgres-destination"}
    return subprocess.Popen([sys.executable, "-c", _CLI], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def wait_peak(proc: subprocess.Popen[str]) -> float:
    """Wait for ``proc``; its peak RSS in MiB. Raises if it failed."""
    _, stderr = proc.communicate()
    peaks = [line.split()[1] for line in stderr.splitlines() if line.startswith("peak-kib ")]
    if proc.returncode != 0 or not peaks:
        raise SystemExit(f"hostcore export failed: {stderr}")
    return int(peaks[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows for (1) and (2)")
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs of (1) and (2)")
    args = parser.parse_args()
    rows = 10_000 if args.quick else args.rows
    small, large = (5_000, 50_000) if args.quick else (100_000, 1_000_000)
    per_host = 5_000 if args.quick else 100_000
    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("needs PostgreSQL server binaries (initdb, pg_ctl): install Debian's "
                         "`postgresql` package")
    server = LocalServer(bindir, durable=True).create()
    work = Path(tempfile.mkdtemp(prefix="hostcore-pg-bench-"))
    try:
        server.start()
        dsn = server.create_database("bench")
        create_schema(dsn)
        config = f'[plugins.postgres-destination]\ndsn = "{dsn}"\n'
        started = time.perf_counter()
        origin = build_store(work / "rate", rows, config)
        print(f"server: PostgreSQL from {bindir}, fsync on; store: {rows:,} permitted rows "
              f"built in {time.perf_counter() - started:.1f} s")

        copy_rows = seam_rows(work / "rate", origin)
        raw_runs, guarded_runs, export_runs = [], [], []
        for _ in range(args.repeat):
            raw_runs.append(raw_rate(dsn, copy_rows))
            guarded_runs.append(raw_rate(dsn, copy_rows, guarded=True))
            export_runs.append(export_rate(work / "rate", dsn))
        raw_s, guarded_s = min(raw_runs), min(guarded_runs)
        pushed, export_s = min(export_runs, key=lambda run: run[1])
        with psycopg.connect(dsn) as conn:  # what the last export left
            found = conn.execute("SELECT pg_total_relation_size('hostcore.rows'), "
                                 "(SELECT count(*) FROM hostcore.rows)").fetchone()
            assert found is not None
            disk, count = found
        inserted_s = insert_rate(dsn, copy_rows)
        del copy_rows
        print(f"raw COPY:    {rows:>10,} rows in {raw_s:6.2f} s = {rows / raw_s:>10,.0f} rows/s "
              f"(psycopg, binary, {BATCH_ROWS:,} per transaction; best of {args.repeat})")
        print(f"guarded:     {rows:>10,} rows in {guarded_s:6.2f} s = "
              f"{rows / guarded_s:>10,.0f} rows/s (the same COPY into the destination's "
              f"table, its guards on); guarded/raw {raw_s / guarded_s:.2f}x")
        print(f"export:      {pushed:>10,} rows in {export_s:6.2f} s = "
              f"{pushed / export_s:>10,.0f} rows/s (best of {args.repeat})")
        print(f"export/raw:  {(pushed / export_s) / (rows / raw_s):.2f}x (goal >= 0.5x)")
        print(f"inserts:     {rows:>10,} rows in {inserted_s:6.2f} s = "
              f"{rows / inserted_s:>10,.0f} rows/s (executemany, pipelined); COPY/inserts "
              f"ratio {inserted_s / raw_s:.1f}")
        print(f"on disk:     {disk / count:,.0f} bytes per row (table, TOAST and indexes)")

        peaks = {}
        for size in (small, large):
            root = work / f"memory-{size}"
            build_store(root, size, config)
            reset(dsn)
            started = time.perf_counter()
            peaks[size] = wait_peak(cli_export(root))
            took = time.perf_counter() - started
            print(f"memory:      hostcore export of {size:>9,} rows: peak RSS "
                  f"{peaks[size]:6.1f} MiB, {size / took:>9,.0f} rows/s (process included)")
            shutil.rmtree(root)
        print(f"memory:      {large:,} rows / {small:,} rows peak RSS: "
              f"{peaks[large] / peaks[small]:.2f}x (flat: about 1.0x)")

        roots = [work / f"host-{n}" for n in range(HOSTS)]
        for root in roots:
            build_store(root, per_host, config)
        reset(dsn)
        started = time.perf_counter()
        wait_peak(cli_export(roots[0]))
        alone = per_host / (time.perf_counter() - started)
        reset(dsn)
        for root in roots:
            forget(root)
        started = time.perf_counter()
        procs = [cli_export(root) for root in roots]
        for proc in procs:
            wait_peak(proc)
        together = HOSTS * per_host / (time.perf_counter() - started)
        with psycopg.connect(dsn) as conn:
            held = conn.execute("SELECT count(*), count(DISTINCT origin) FROM hostcore.rows"
                                ).fetchone()
            assert held is not None
        print(f"fleet:       1 host alone {alone:>9,.0f} rows/s; {HOSTS} hosts at once "
              f"{together:>9,.0f} rows/s together ({held[0]:,} rows from {held[1]} origins)")
        print(f"fleet:       {HOSTS} hosts / 1 host aggregate rate: {together / alone:.2f}x "
              f"on {os.cpu_count()} CPU(s)")
    finally:
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
