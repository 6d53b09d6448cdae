"""Property tests of the store and the export seam against a plain Python model.

Random sequences of appends, purges and policy changes (class-per-entry list,
sync opt-out set, ``.hostcoreignore`` dotfiles) run against a real store; after
each step a random read through the seam must return exactly the rows the model
says are live, after the cursor, in the asked partition and permitted by the
policy, in position order, with only the asked columns. Positions never repeat
and every purge shows as a version change that is not growth.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcore.evidence.inputs import ClassList, IgnoreDotfiles, SyncOptOut
from hostcore.evidence.policy import Policy
from hostcore.evidence.seam import COLUMNS, ExportSeam
from hostcore.evidence.store import EvidenceRow, PartitionVersion, Store

DIRS = ["w", "w/x", "w/x/y", "w/xy", "v", "v/z"]
SOURCES = ["s0", "s1", "s2"]
PARTS = ["a", "b"]
SESSIONS = ["k1", "k2", "k3"]
STAMPS = ["2025-01-01T00:00:00Z", "2025-01-02T12:00:00+02:00", "2025-01-03T00:00:00Z"]
REMOTES = ["", "git@github.com:o/r.git", "https://github.com/o/q"]

row_strategy = st.fixed_dictionaries({
    "partition": st.sampled_from(PARTS),
    "source_id": st.sampled_from(SOURCES),
    "session_id": st.sampled_from(SESSIONS),
    "directory": st.sampled_from([*DIRS, ""]),
    "ts": st.sampled_from(STAMPS),
    "git_remote": st.sampled_from(REMOTES),
    "key": st.sampled_from([None, None, "e1", "e2"]),
    "n": st.integers(0, 9),
})
selector_strategy = st.fixed_dictionaries({}, optional={
    "source_id": st.sampled_from(SOURCES),
    "session_id": st.sampled_from(SESSIONS),
    "directory": st.sampled_from(DIRS),
    "before": st.sampled_from(STAMPS),
}).filter(bool)
policy_strategy = st.fixed_dictionaries({
    "classes": st.dictionaries(st.sampled_from(DIRS), st.sampled_from(["full", "local-only"]),
                               max_size=3),
    "opted_out": st.frozensets(st.sampled_from(SOURCES), max_size=2),
    "ignored": st.frozensets(st.sampled_from(DIRS), max_size=2),
})
op_strategy = st.one_of(
    st.tuples(st.just("append"), st.lists(row_strategy, max_size=8)),
    st.tuples(st.just("purge"), selector_strategy),
    st.tuples(st.just("policy"), policy_strategy),
)
read_strategy = st.tuples(
    st.one_of(st.none(), st.sampled_from(PARTS)),
    st.integers(0, 40),
    st.lists(st.sampled_from(list(COLUMNS)), max_size=4, unique=True),
)


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


class Model:
    """Live rows by position, and the policy, kept the simple way."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.rows: dict[int, dict] = {}
        self.head = 0
        self.purged_keys: set[tuple[str, str]] = set()  # a purged key stays purged
        self.policy = {"classes": {}, "opted_out": frozenset(), "ignored": frozenset()}

    def full_dir(self, rel: str) -> str:
        return str(self.base / rel) if rel else ""

    def append(self, rows: list[dict]) -> int:
        added = 0
        for r in rows:
            if r["key"] is not None and ((r["partition"], r["key"]) in self.purged_keys or any(
                    o["partition"] == r["partition"] and o["key"] == r["key"]
                    for o in self.rows.values())):
                continue
            self.head += 1
            self.rows[self.head] = r
            added += 1
        return added

    def purge(self, selector: dict) -> dict[str, int]:
        doomed = [p for p, r in self.rows.items() if self.matches(r, selector)]
        counts: dict[str, int] = {}
        for p in doomed:
            gone = self.rows.pop(p)
            part = gone["partition"]
            counts[part] = counts.get(part, 0) + 1
            if gone["key"] is not None:
                self.purged_keys.add((part, gone["key"]))
        return counts

    @staticmethod
    def matches(r: dict, selector: dict) -> bool:
        if "source_id" in selector and r["source_id"] != selector["source_id"]:
            return False
        if "session_id" in selector and r["session_id"] != selector["session_id"]:
            return False
        if "directory" in selector:
            d, e = r["directory"], selector["directory"]
            if not r["directory"] or not (d == e or d.startswith(e + "/")):
                return False
        return not ("before" in selector and not moment(r["ts"]) < moment(selector["before"]))

    def permitted(self, r: dict) -> bool:
        if r["source_id"] in self.policy["opted_out"]:
            return False
        d = r["directory"]
        if not d:
            return True
        covering = [e for e in self.policy["classes"] if d == e or d.startswith(e + "/")]
        if covering and self.policy["classes"][max(covering, key=len)] == "local-only":
            return False
        return not any(d == e or d.startswith(e + "/") for e in self.policy["ignored"])

    def expected(self, partition: str | None, cursor: int, columns: list[str]) -> list[tuple]:
        out = []
        for position in sorted(self.rows):
            r = self.rows[position]
            if position <= cursor or (partition is not None and r["partition"] != partition):
                continue
            if self.permitted(r):
                out.append((position, *(self.value(r, c) for c in columns)))
        return out

    def value(self, r: dict, column: str) -> object:
        if column == "directory":
            return self.full_dir(r["directory"])
        if column == "payload":
            return json.dumps({"n": r["n"]}, separators=(",", ":"))
        if column == "ts":
            return moment(r["ts"]).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return r[column]


def write_policy(base: Path, root: Path, policy: dict) -> None:
    lines = "".join(f"{cls}\t{base / d}\n" for d, cls in sorted(policy["classes"].items()))
    (root / "classes.tsv").write_text("# written by the test\n" + lines)
    (root / "opt-out.json").write_text(json.dumps(sorted(policy["opted_out"])))
    for d in DIRS:
        dotfile = base / d / ".hostcoreignore"
        if d in policy["ignored"]:
            dotfile.touch()
        elif dotfile.exists():
            dotfile.unlink()


def read_both(seam: ExportSeam, partition: str | None, cursor: int,
              columns: list[str]) -> list[tuple]:
    sync_rows = list(seam.read_rows_since_sync(partition, cursor, columns))

    async def drain() -> list[tuple]:
        return [r async for r in seam.read_rows_since(partition, cursor, columns)]

    assert asyncio.run(drain()) == sync_rows
    return sync_rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_seam_returns_exactly_the_permitted_live_rows_after_the_cursor(data):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "work"
        for d in DIRS:
            (base / d).mkdir(parents=True, exist_ok=True)
        root = Path(tmp) / "root"
        root.mkdir()
        store = Store(root / "store.sqlite3")
        policy = Policy([ClassList(root / "classes.tsv"),
                         SyncOptOut(root / "opt-out.json"),
                         IgnoreDotfiles(ttl=0)])
        seam = ExportSeam(store, policy, fetch_rows=data.draw(st.integers(1, 5)))
        model = Model(base)
        seen_positions: set[int] = set()
        superseded: list[tuple[str, PartitionVersion]] = []
        try:
            for op, arg in data.draw(st.lists(op_strategy, min_size=1, max_size=12)):
                if op == "append":
                    old_head = store.head_position()
                    rows = [EvidenceRow(partition=r["partition"], source_id=r["source_id"],
                                        session_id=r["session_id"],
                                        directory=model.full_dir(r["directory"]), ts=r["ts"],
                                        git_remote=r["git_remote"], payload={"n": r["n"]},
                                        key=r["key"]) for r in arg]
                    added = store.append(rows)
                    assert added == model.append(arg)
                    new = set(range(old_head + 1, store.head_position() + 1))
                    assert len(new) == added and not new & seen_positions
                    seen_positions |= new
                elif op == "purge":
                    before = store.partitions()
                    selector = dict(arg)
                    if "directory" in selector:
                        selector["directory"] = model.full_dir(selector["directory"])
                    deleted = model.purge(arg)
                    assert store.purge(**selector) == deleted
                    after = store.partitions()
                    for name, version in before.items():
                        if name in deleted:
                            superseded.append((name, version))
                        else:
                            assert after[name] == version
                else:
                    model.policy = arg
                    write_policy(base, root, arg)
                counts = {p: sum(r["partition"] == p for r in model.rows.values())
                          for p in PARTS}
                for name, version in store.partitions().items():
                    assert version.row_count == counts[name]
                # A purge stays visible: no later version reads as growth from the
                # version before it, even once appends restore the row count.
                for name, version in superseded:
                    assert not store.partitions()[name].grew_from(version)
                partition, cursor, columns = data.draw(read_strategy)
                got = read_both(seam, partition, cursor, columns)
                assert got == model.expected(partition, cursor, columns)
                assert [r[0] for r in got] == sorted({r[0] for r in got})
                assert all(len(r) == len(columns) + 1 for r in got)
        finally:
            store.close()
