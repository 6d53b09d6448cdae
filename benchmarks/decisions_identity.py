"""Benchmark: the export's decisions identity over a large ledger.

A ledger of N records (10,000 by default), every one with a ``poll`` section and
about half with a ``control``, ``session`` or ``ended`` section. Measured, each
also as a ratio to reading the same N record files raw (open + read, no
decoding) in the same run:

* reading every record and folding the decision-bearing ones (what
  ``decisions_identity`` cost before the index kept the members);
* ``decisions_identity(host)``: first call with no index (it is derived from the
  records), first call of a new process with the index in place, a repeated call,
  and a call after one decision changed;

with the record files each read (target: 0 when nothing changed). ``--repeat``
interleaved runs (default 5), each from no index, each call's time printed as the
median, min and max over the runs, with PASS/MISS for the targets.

Usage: ``python benchmarks/decisions_identity.py [--records N] [--repeat R] [--quick]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# The same raw baseline as the poll-cycle benchmark beside this script.
from _figures import spread
from poll_cycle import read_raw

from hostcore.export.exporter import decisions_identity
from hostcore.export.ref import fold
from hostcore.host import Host
from hostcore.workitems.ledger import Ledger
from hostcore.workitems.records import (
    EndedStamp,
    PollSection,
    PortableRecord,
    decision_member,
    encode_record,
)


def plant(folder: Path, count: int) -> None:
    """Write ``count`` records straight to disk (setup only, not measured)."""
    ledger = Ledger(folder)
    ledger.portable.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        record = PortableRecord(
            ref=f"owner/repo#{n}",
            poll=PollSection(last_polled_at="2026-01-01T00:00:00Z", updated_at="2026-01-01"),
            control={"assignee": f"agent-{n % 7}", "hold": n % 2 == 0} if n % 3 == 0 else None,
            session={"id": f"s{n}", "turns": n % 40} if n % 5 == 0 else None,
            ended=EndedStamp(at="2026-01-02T00:00:00Z", state="closed") if n % 7 == 0 else None,
        )
        ledger.path_for(record.ref).write_bytes(encode_record(record))


def full_read(folder: Path) -> str:
    """The fold over every record file, decoded one by one (no index)."""
    members = {}
    for ref, record in Ledger(folder).iter_records():
        member = decision_member(record)
        if member is not None:
            members[ref] = member
    return fold(members)


def timed(call: Callable[[], str], ledger: Ledger) -> tuple[str, float, int]:
    reads = ledger.counters.reads
    started = time.perf_counter()
    value = call()
    return value, time.perf_counter() - started, ledger.counters.reads - reads



def one_run(root: Path, folder: Path, first_record: bytes) -> dict[str, tuple[str, float, int]]:
    """One interleaved run: the raw read, the full read and fold, then each call of
    ``decisions_identity`` from no index on (so each run pays the derivation again)."""
    ledger = Ledger(folder)
    ledger.path_for("owner/repo#0").write_bytes(first_record)  # undo the last run's change
    for leftover in folder.glob(f"{ledger.index_path.name}*"):
        leftover.unlink()  # the index and its -wal/-shm: the first call derives it again
    calls: dict[str, tuple[str, float, int]] = {"raw read": ("", read_raw(folder), 0)}
    started = time.perf_counter()
    value = full_read(folder)
    calls["read and fold every record"] = (value, time.perf_counter() - started, 0)

    def host_identity(host: Host) -> Callable[[], str]:
        return lambda: decisions_identity(host)

    with Host(root=root, plugins=[], load_entrypoints=False, env={}) as host:
        calls["first call, no index yet"] = timed(host_identity(host), host.ledger)
    with Host(root=root, plugins=[], load_entrypoints=False, env={}) as host:
        calls["first call of a new process"] = timed(host_identity(host), host.ledger)
        calls["repeated call"] = timed(host_identity(host), host.ledger)
        host.ledger.write(PortableRecord(ref="owner/repo#0", control={"assignee": "new"}))
        calls["after one decision changed"] = timed(host_identity(host), host.ledger)
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 records")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved runs (median, min, max)")
    args = parser.parse_args(argv)
    count = 1_000 if args.quick else args.records
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "ledger"
        plant(folder, count)
        first_record = Ledger(folder).path_for("owner/repo#0").read_bytes()
        read_raw(folder)  # warm the page cache the same way for everything measured
        runs = [one_run(root, folder, first_record) for _ in range(args.repeat)]

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"decisions_identity: {count} records, "
          f"{sum(1 for n in range(count) if n % 3 == 0 or n % 5 == 0 or n % 7 == 0)} "
          f"with a decision; {args.repeat} interleaved runs, each from no index")
    raw = [run["raw read"][1] for run in runs]
    print(f"  raw read of {count} record files: {spread([r * 1000 for r in raw], unit=' ms')} "
          "(baseline)")
    checks = []
    for label in list(runs[0])[1:]:
        ms = [run[label][1] * 1000 for run in runs]
        ratios = [run[label][1] / run["raw read"][1] for run in runs]
        reads = sorted({run[label][2] for run in runs})
        shown = "every record" if label.startswith("read and fold") else \
            ", ".join(map(str, reads))
        print(f"  {label:30} {spread(ms, unit=' ms')}; {spread(ratios, unit='x')} raw; "
              f"reads {shown}")
    for run in runs:
        expected = run["read and fold every record"][0]
        checks.append(all(run[label][0] == expected for label in
                          ("first call, no index yet", "first call of a new process",
                           "repeated call"))
                      and run["repeated call"][2] == 0
                      and run["first call of a new process"][2] == 0
                      and run["after one decision changed"][0] != expected)
    print(f"  peak RSS: {peak_kib / 1024:.1f} MiB")
    met = sum(checks)
    print(f"  targets (the same value as reading every record; 0 reads when nothing "
          f"changed, in a new process too; a decision change moves it): met in {met} of "
          f"{len(checks)} runs -> {'PASS' if met == len(checks) else 'MISS'}")
    return 0 if met == len(checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
