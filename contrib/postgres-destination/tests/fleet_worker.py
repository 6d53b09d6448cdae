"""A host in a process of its own, for the multi-process tests (not collected by pytest).

    python fleet_worker.py host ROOT DSN ROUNDS GO
        Prints {"ready": true} and waits for the file GO to exist. Then, each
        round: add rows (some in a local-only directory), move this host's context
        (a policy entry for a directory with no rows), export with small batches.
        Prints one JSON line at the end: origin, rounds, rows pushed, conflicts.

    python fleet_worker.py rolling ROOT DSN ROUNDS GO WRITER
        As ``host``, through a destination that knows the schema versions up to
        WRITER only (a host still on an older package), pausing between rounds so
        that a migration lands while the hosts push. Prints the same JSON line.

    python fleet_worker.py ticks ROOT DSN GO WINDOW
        A host whose export backs off for WINDOW seconds after a failure. Exports
        once, prints {"ready": true} and waits for GO; then adds rows and, every
        TICK seconds, runs the export as the worker would, printing
        {"failed": T} at each failed run, until one succeeds: then one JSON line,
        origin, attempts (the times runs contacted the server), succeeded (the time).

    python fleet_worker.py export ROOT DSN BATCH_ROWS
        One export with BATCH_ROWS rows per push (the kill tests SIGKILL it).
        Prints "pushed" each time a push returns, then {"rows": ...}.

    python fleet_worker.py cas DSN ORIGIN NAME ATTEMPTS GO
        Governance only, on an origin several processes share. Prints {"ready": true}
        once connected and waits for the file GO; then, ATTEMPTS times,
        reads the context published and pushes a new one expecting what was read.
        Prints one JSON line per attempt: {"ok": true, "expect": ..., "set": ...}
        or {"ok": false, "expect": ..., "found": ...}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import hostcore_postgres.plugin as postgres_plugin
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.schema import MIGRATIONS

from hostcore.errors import HostcoreError
from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import ExportBatch
from hostcore.export.exporter import ExportDeferred, Exporter
from hostcore.export.ref import ABSENT, Conflict, Ref
from hostcore.host import Host

ROWS_PER_ROUND = 300
BATCH_ROWS = 128
PERMITTED, WITHHELD = "/fleet/work", "/fleet/secret"


def wait_for(go: str) -> None:
    """Say ready, then wait for the file ``go``: every process starts at once."""
    print(json.dumps({"ready": True}), flush=True)
    while not Path(go).exists():
        time.sleep(0.001)


def open_host(root: str, dsn: str) -> Host:
    return Host(root=root, plugins=[postgres_plugin], load_entrypoints=False, env={},
                config={"plugins": {"postgres-destination": {"dsn": dsn}}})


def host(root: str, dsn: str, rounds: int, go: str, writer: int | None = None,
         pause: float = 0.0) -> None:
    Path(root).mkdir(parents=True, exist_ok=True)
    with open_host(root, dsn) as h:
        h.policy.input("class-list").set(WITHHELD, "local-only")
        wait_for(go)
        pushed = conflicts = 0
        for number in range(rounds):
            h.store.append(
                EvidenceRow(partition="sessions", source_id="claude",
                            directory=WITHHELD if i % 5 == 0 else PERMITTED,
                            payload={"round": number, "i": i})
                for i in range(ROWS_PER_ROUND))
            # A class-list entry for a directory with no rows: the context moves, the
            # permitted rows do not.
            h.policy.input("class-list").set(f"/fleet/empty-{number}", "local-only")
            (destination,) = h.destinations
            if writer is not None:
                destination = PostgresDestination(
                    dsn, migrations={v: s for v, s in MIGRATIONS.items() if v <= writer})
            summary = Exporter(h, destination, batch_rows=BATCH_ROWS).run()
            if writer is not None:
                destination.close()
            pushed += summary.rows
            conflicts += len(summary.conflicts)
            time.sleep(pause)
        print(json.dumps({"origin": h.store.instance_id, "rounds": rounds, "rows": pushed,
                          "conflicts": conflicts}))


class Announcing:
    """A destination that prints a line each time a push returns (committed)."""

    def __init__(self, inner: PostgresDestination) -> None:
        self.inner = inner
        self.name = inner.name
        self.key = inner.key

    def published(self, stream: str, origin: str) -> Ref:
        return self.inner.published(stream, origin)

    def instance(self) -> str:
        return self.inner.instance()

    def push(self, batch: ExportBatch) -> Ref:
        ref = self.inner.push(batch)
        print("pushed", flush=True)
        return ref


def export(root: str, dsn: str, batch_rows: int) -> None:
    with open_host(root, dsn) as h:
        (destination,) = h.destinations
        summary = Exporter(h, Announcing(destination), batch_rows=batch_rows).run()
        print(json.dumps({"rows": summary.rows}))


TICK = 0.05


def ticks(root: str, dsn: str, go: str, window: float) -> None:
    Path(root).mkdir(parents=True, exist_ok=True)
    config = {"plugins": {"postgres-destination": {"dsn": dsn},
                          "export": {"backoff_seconds": window,
                                     "backoff_max_seconds": window}}}
    with Host(root=root, plugins=[postgres_plugin], load_entrypoints=False, env={},
              config=config) as h:
        rows = (EvidenceRow(partition="sessions", source_id="claude", directory=PERMITTED,
                            payload={"i": i}) for i in range(50))
        h.store.append(rows)
        (destination,) = h.destinations
        Exporter(h, destination).run()
        wait_for(go)
        h.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                   directory=PERMITTED, payload={"after": i})
                       for i in range(20))
        attempts: list[float] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            started = time.time()
            try:
                Exporter(h, destination).run()
            except ExportDeferred:
                time.sleep(TICK)
                continue
            except HostcoreError:
                attempts.append(started)
                print(json.dumps({"failed": started}), flush=True)
                time.sleep(TICK)
                continue
            attempts.append(started)
            print(json.dumps({"origin": h.store.instance_id, "attempts": attempts,
                              "succeeded": started}))
            return
        raise SystemExit("no export succeeded within two minutes")


def cas(dsn: str, origin: str, name: str, attempts: int, go: str) -> None:
    destination = PostgresDestination(dsn)
    try:
        destination.published("main", origin)  # connected, schema checked
        wait_for(go)
        for number in range(attempts):
            seen = destination.published("main", origin).context
            value = f"{name}-{number}"
            batch = ExportBatch(stream="main", origin=origin, rows=[],
                                sets=Ref(context=value), expect=Ref(context=seen or ABSENT))
            try:
                destination.push(batch)
            except Conflict as conflict:
                print(json.dumps({"ok": False, "expect": seen, "found": conflict.actual}),
                      flush=True)
            else:
                print(json.dumps({"ok": True, "expect": seen, "set": value}), flush=True)
    finally:
        destination.close()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "host":
        host(args[0], args[1], int(args[2]), args[3])
    elif mode == "rolling":
        host(args[0], args[1], int(args[2]), args[3], writer=int(args[4]), pause=0.15)
    elif mode == "ticks":
        ticks(args[0], args[1], args[2], float(args[3]))
    elif mode == "export":
        export(args[0], args[1], int(args[2]))
    elif mode == "cas":
        cas(args[0], args[1], args[2], int(args[3]), args[4])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
