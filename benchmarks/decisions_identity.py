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

with the record files each read (target: 0 when nothing changed).

Usage: ``python benchmarks/decisions_identity.py [--records N] [--quick]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# The same raw baseline as the poll-cycle benchmark beside this script.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 records")
    args = parser.parse_args(argv)
    count = 1_000 if args.quick else args.records
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "ledger"
        plant(folder, count)
        read_raw(folder)  # warm the page cache the same way for everything measured
        raw = min(read_raw(folder) for _ in range(3))
        started = time.perf_counter()
        expected = full_read(folder)
        full = time.perf_counter() - started

        def host_identity(host: Host) -> Callable[[], str]:
            return lambda: decisions_identity(host)

        results = []
        with Host(root=root, plugins=[], load_entrypoints=False, env={}) as host:
            results.append(("first call, no index yet",
                            *timed(host_identity(host), host.ledger)))
        with Host(root=root, plugins=[], load_entrypoints=False, env={}) as host:
            results.append(("first call of a new process",
                            *timed(host_identity(host), host.ledger)))
            results.append(("repeated call", *timed(host_identity(host), host.ledger)))
            host.ledger.write(PortableRecord(ref="owner/repo#0", control={"assignee": "new"}))
            changed = timed(host_identity(host), host.ledger)
        values_agree = all(value == expected for _, value, _, _ in results)

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"decisions_identity: {count} records, "
          f"{sum(1 for n in range(count) if n % 3 == 0 or n % 5 == 0 or n % 7 == 0)} "
          "with a decision")
    print(f"  raw read of {count} record files: {raw * 1000:8.1f} ms (baseline)")
    print(f"  {'read and fold every record':34} {full * 1000:8.1f} ms  {full / raw:7.3f}x raw  "
          f"reads {count}")
    for label, _, seconds, reads in [*results, ("after one decision changed", *changed)]:
        print(f"  {label:34} {seconds * 1000:8.1f} ms  {seconds / raw:7.3f}x raw  reads {reads}")
    print(f"  peak RSS: {peak_kib / 1024:.1f} MiB")
    repeated_reads = results[2][3]
    ok = values_agree and repeated_reads == 0 and changed[1] != expected
    print(f"  targets (same value as reading every record; 0 reads when nothing changed; "
          f"a decision change moves it): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
