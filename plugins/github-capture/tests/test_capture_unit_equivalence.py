"""Passes by rows and by tuples derive the same inventory over random histories.

A state machine drives one real store (SQLite file), the real policy inputs and
the export seam, and two sidecars over them, one per unit, with budgets small
enough that every pass takes several ticks. Between ticks it appends (to the
evidence partitions and to ``github_events``), purges by directory or source,
drops partitions, changes the policy, kills a sidecar (a new process on the
same state file, or a tick whose write never landed) and replaces the store
file. After every tick of either sidecar, what it lets capture poll holds only
repositories with permitted evidence now; at the end, once neither has
anything pending, both inventories equal the keys of the permitted evidence.

CI size: ``CAPTURE_EQUIVALENCE_EXAMPLES`` histories (default 100) of up to
``CAPTURE_EQUIVALENCE_STEPS`` steps (default 50), well under a minute. Raise
both for a soak.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hostcore_github_capture.remotes import repo_key
from hostcore_github_capture.sidecar import CAPTURE_PARTITION, UNITS, Sidecar
from hostcore_github_capture.state import SidecarState, StateFile
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from hostcore.evidence.inputs import CLASS_LIST_FILE, OPT_OUT_FILE, ClassList, SyncOptOut
from hostcore.evidence.policy import Policy
from hostcore.evidence.seam import ExportSeam
from hostcore.evidence.store import STORE_FILE_NAME, EvidenceRow, Store

EXAMPLES = int(os.environ.get("CAPTURE_EQUIVALENCE_EXAMPLES", "100"))
STEPS = int(os.environ.get("CAPTURE_EQUIVALENCE_STEPS", "50"))
ROW_BUDGET = 3
TUPLE_BUDGET = 2
# Enough ticks for any history of STEPS steps to settle (each step adds few rows).
SETTLE_TICKS = 2000
# Every tick fsyncs a state file: on a memory file system, when there is one, the
# histories cost their SQLite and policy work rather than the disk's flushes.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

PARTITIONS = ["alpha", "beta", CAPTURE_PARTITION]
DIRECTORIES = ["/w/a", "/w/b", "/w/b/sub"]
SOURCES = ["claude", "codex"]
REMOTES = ["https://github.com/o/r{}", "git@github.com:O/R{}.git", "https://gitlab.com/o/r{}",
           "https://github.com/o/r{}?tab=readme", ""]


# Repositories only a look-alike replacement store evidences.
LOOK_ALIKE = 100

# A session's rows: (partition, directory, source, [(remote form, repository)]).
Session = tuple[str, str, str, list[tuple[int, int]]]
SESSIONS = st.tuples(
    st.sampled_from(PARTITIONS), st.sampled_from(DIRECTORIES), st.sampled_from(SOURCES),
    st.lists(st.tuples(st.integers(0, len(REMOTES) - 1), st.integers(0, 9)),
             min_size=1, max_size=12))


def remote(form: int, repo: int) -> str:
    return REMOTES[form].format(repo)


class Histories(RuleBasedStateMachine):
    """One store, one policy, one sidecar per unit."""

    @initialize(sessions=st.lists(SESSIONS, min_size=1, max_size=4))
    def open(self, sessions: list[Session]) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="capture-units-", dir=SCRATCH))
        self.class_list = ClassList(self.root / CLASS_LIST_FILE)
        self.opt_out = SyncOptOut(self.root / OPT_OUT_FILE)
        self.policy = Policy([self.class_list, self.opt_out])
        self.store = Store(self.root / STORE_FILE_NAME)
        self.seam = ExportSeam(self.store, self.policy)
        self.sidecars = {unit: self._sidecar(unit) for unit in UNITS}
        self.sessions: list[Session] = []
        for session in sessions:
            self._append(*session)

    def _sidecar(self, unit: str) -> Sidecar:
        """A sidecar as a freshly started process would build it, on its own state file."""
        state = StateFile(self.root / f"sidecar-{unit}.json", SidecarState)
        return Sidecar(self.store, self.seam, state, lambda *a, **k: None, unit=unit,
                       row_budget=ROW_BUDGET, tuple_budget=TUPLE_BUDGET, clock=lambda: 1e9)

    def truth(self) -> set[str]:
        """The keys of every permitted evidence row, read through the seam now."""
        keys = set()
        for _, partition, value in self.seam.read_rows_since_sync(
                None, 0, ["partition", "git_remote"]):
            key = repo_key(value) if value and partition != CAPTURE_PARTITION else None
            if key is not None:
                keys.add(key)
        return keys

    # -- what happens to the history ---------------------------------------------

    @rule(session=SESSIONS)
    def append(self, session: Session) -> None:
        self._append(*session)

    @rule(session=SESSIONS)
    def append_more(self, session: Session) -> None:
        self._append(*session)

    def _append(self, partition: str, directory: str, source: str,
                remotes: list[tuple[int, int]]) -> None:
        self.sessions.append((partition, directory, source, remotes))
        self.store.append([EvidenceRow(partition=partition, source_id=source,
                                       directory=directory, git_remote=remote(form, repo))
                           for form, repo in remotes])

    @rule(how=st.sampled_from(["directory", "source", "source then append", "partition"]),
          directory=st.sampled_from(DIRECTORIES), source=st.sampled_from(SOURCES),
          partition=st.sampled_from(PARTITIONS[:2]), repo=st.integers(0, 9))
    def lose(self, how: str, directory: str, source: str, partition: str, repo: int) -> None:
        """Evidence goes: a purge by directory or source (then, maybe, new rows), or a
        dropped partition."""
        if how == "directory":
            self.store.purge(directory=directory)
        elif how == "partition":
            self.store.drop_partition(partition)
        else:
            self.store.purge(source_id=source)
            if how == "source then append":
                self._append(partition, directory, source, [(0, repo)])

    @rule(directory=st.sampled_from(DIRECTORIES), local=st.sampled_from([True, False, False]),
          source=st.sampled_from(SOURCES), out=st.sampled_from([True, False, False]),
          which=st.booleans())
    def change_policy(self, directory: str, local: bool, source: str, out: bool,
                      which: bool) -> None:
        if which:
            self.class_list.set(directory, "local-only" if local else "full")
        else:
            self.opt_out.set(source, out)

    @rule(how=st.sampled_from(["new", "again", "look-alike"]),
          sessions=st.lists(SESSIONS, max_size=3),
          repos=st.lists(st.integers(0, 9), min_size=1, max_size=4))
    def replace_store(self, how: str, sessions: list[Session], repos: list[int]) -> None:
        """The store file is deleted and a new one ingests, then ``sessions``:

        * ``new``: nothing more;
        * ``again``: every session ever appended, purged ones included (transcripts
          read in again from disk);
        * ``look-alike``: in each old partition, in the order they were made, more
          rows than it held, of other repositories (``repos``), so that every
          partition looks like a growth of its old version, as in the issue (and no
          key of the old store is evidenced any more).
        """
        versions = self.store.partitions()
        history = list(self.sessions) if how == "again" else []
        self.sessions = []
        self.store.close()
        for suffix in ("", "-wal", "-shm"):
            (self.root / f"{STORE_FILE_NAME}{suffix}").unlink(missing_ok=True)
        self.store = Store(self.root / STORE_FILE_NAME)
        self.seam = ExportSeam(self.store, self.policy)
        self.sidecars = {unit: self._sidecar(unit) for unit in UNITS}  # new processes
        if how == "look-alike":
            for name in sorted(versions, key=lambda n: versions[n].epoch):
                count = versions[name].row_count + 1
                history.append((name, DIRECTORIES[0], SOURCES[0],
                                [(0, LOOK_ALIKE + repos[i % len(repos)])
                                 for i in range(count)]))
        for session in history + sessions:
            self._append(*session)

    # -- what the sidecars do ---------------------------------------------------

    @rule(unit=st.sampled_from(UNITS), ticks=st.integers(1, 3), request=st.booleans())
    def tick(self, unit: str, ticks: int, request: bool) -> None:
        sidecar = self.sidecars[unit]
        for n in range(ticks):
            sidecar.tick(request=request and n == 0)
            allowed, _ = sidecar.capture_set()
            # Conservative: capture may only poll what permitted evidence points at now.
            assert allowed <= self.truth(), (unit, allowed - self.truth())

    @rule(unit=st.sampled_from(UNITS))
    def restart(self, unit: str) -> None:
        self.sidecars[unit] = self._sidecar(unit)

    @precondition(lambda self: all(s.state.path.exists() for s in self.sidecars.values()))
    @rule(unit=st.sampled_from(UNITS))
    def killed_mid_tick(self, unit: str) -> None:
        """A tick whose state write never landed: the process died before it."""
        path = self.sidecars[unit].state.path
        before = path.read_bytes()
        self.sidecars[unit].tick()
        path.write_bytes(before)
        self.sidecars[unit] = self._sidecar(unit)

    def teardown(self) -> None:
        try:
            if hasattr(self, "store"):
                self._settle_and_compare()
        finally:
            if hasattr(self, "store"):
                self.store.close()
                shutil.rmtree(self.root, ignore_errors=True)

    def _settle_and_compare(self) -> None:
        inventories: dict[str, Any] = {}
        for unit, sidecar in self.sidecars.items():
            for _ in range(SETTLE_TICKS):
                if not sidecar.pending():
                    break
                sidecar.tick()
            else:
                raise AssertionError(f"the {unit} sidecar did not settle")
            inventories[unit] = set(sidecar.state.load().repos)
        truth = self.truth()
        assert inventories["rows"] == inventories["tuples"] == truth, (inventories, truth)


Histories.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS,
                                       deadline=None)
test_both_units_derive_the_same_inventory_over_random_histories = Histories.TestCase
