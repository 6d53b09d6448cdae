"""The stale sweep: remove heartbeat caches whose owners are proven dead, exactly.

Cheap first: one ``os.scandir`` pass per cache folder judges every file from the
stat the scan already made. A heartbeat refreshed within the stale window is
never opened. Only stale candidates take the custody path:

1. take the instance's custody (refused: a live or uncertain owner holds it);
2. capture the heartbeat's revision and bytes, and re-judge: fresh again, malformed,
   foreign or with a live owner → kept;
3. delete that exact revision through :func:`delete_file_if_unchanged`, whose
   validation records the audit: a provisional ``sweep_observed`` for the
   generation captured in step 2, else a ``heartbeat_sweep_unrecorded``
   diagnostic; if neither can be written the cache is put back;
4. only after a confirmed deletion, prune the dependents (the pid-map entry
   that still names the instance, the prompt hash), each pinned first and
   kept unless the owner's heartbeat is still absent *after* the pin. Their
   private unlinks, once each pin is confirmed, are queued and run in parallel
   batches (:mod:`.unlinker`) while the sweep goes on: the wait of an unlink on
   disk is the kernel's, and several wait at once. They are counted as each batch
   ends, and the last batch ends before the sweep's audits are sealed.

Dependents whose owner had no heartbeat in the scan (orphans) are pruned the
same way: the earlier scan is not proof that the owner is still absent.
Anything pending in a private custody folder protects its source; an operation
of unknown identity protects its whole folder. Counts include confirmed
deletions only.

Every file is read as untrusted input: through the registry's folders held open
as verified descriptors (:mod:`.anchor`: a root that is a symlink, another
user's or world-writable is refused before anything is read, and a root whose
path stops naming the folder held open stops the sweep, counted ``refused``),
without following a symlink, and only up to its size cap (:mod:`.limits`: a
larger record is kept unread, counted ``oversized``).

One bad file never stops a sweep: a file the system refuses to read or move
(mode 000, no space, an I/O error) is skipped and counted as ``unhandled``, and
the sweep goes on with the next. Generation records older than the retention
whose heartbeat is gone are pruned under their instance's custody: ended ones,
and ``live`` ones of crashed sessions (the sweep holding the instance's lock is
the proof that no session holds it). Lock files of instances with neither a
heartbeat nor a generation record are pruned the same way, and temp files of
killed writers met by the scan are pruned by age (see :mod:`.maintenance`). The
counts of the last sweep are kept in ``last-sweep.json``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import time
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from hostcore.errors import RecordError
from hostcore.records import decode_json
from hostcore_file_custody.anchor import RegistryAnchor
from hostcore_file_custody.audit import (
    AuditJournal,
    record_live_sweep_observation,
    record_sweep_unrecorded,
)
from hostcore_file_custody.custody import Custody
from hostcore_file_custody.deletion import DeleteFileResult, delete_file_if_unchanged
from hostcore_file_custody.errors import (
    CustodyError,
    CustodyRefused,
    FileAccessError,
    OversizedRecordError,
    UnsafePathError,
    UnstableRevisionError,
)
from hostcore_file_custody.fsio import TEMP_SUFFIX, publish_at, read_capped
from hostcore_file_custody.hooks import NO_HOOKS, SweepHooks
from hostcore_file_custody.limits import MAX_RECORD_BYTES
from hostcore_file_custody.locks import LOCKS
from hostcore_file_custody.maintenance import Entries, prune_entries
from hostcore_file_custody.owner import Liveness, current_host, owner_liveness
from hostcore_file_custody.private import ManifestSpares, PendingCustody, pending_custody
from hostcore_file_custody.registry import (
    HEARTBEAT_VERSION,
    GenerationRecord,
    Heartbeat,
    HeartbeatRegistry,
    PidMapEntry,
    is_generation_id,
)
from hostcore_file_custody.revision import FileRevision, capture_at, lstat_at
from hostcore_file_custody.support import require_custody
from hostcore_file_custody.unlinker import Unlinker

# A heartbeat not refreshed for this long is a sweep candidate (seconds).
STALE_AFTER_SECONDS = 600.0
# Candidates taken through the custody path per sweep; the rest wait for the next one.
MAX_CANDIDATES_PER_SWEEP = 1_000
# Generation records of ended sessions are kept this long, then pruned (seconds).
GENERATION_RETENTION_SECONDS = 7 * 24 * 3600.0
# Errors that skip one file (counted ``unhandled``) instead of stopping the sweep.
_SKIPPED = (OSError, FileAccessError)

Emit = Callable[..., Any]
_T = TypeVar("_T")


class SweepReport(msgspec.Struct, kw_only=True):
    """Counts of one sweep (all counts; ``deleted`` counts confirmed deletions only)."""

    scanned: int = 0
    candidates: int = 0
    deferred: int = 0
    deleted: int = 0
    kept_fresh: int = 0
    kept_live: int = 0
    kept_uncertain: int = 0
    kept_changed: int = 0
    kept_refused: int = 0
    kept_error: int = 0
    retained: int = 0
    vanished: int = 0
    protected: int = 0
    protected_folders: int = 0
    observations: int = 0
    diagnostics: int = 0
    dependents_deleted: int = 0
    dependents_kept: int = 0
    unhandled: int = 0
    unsupported: int = 0
    oversized: int = 0
    refused: int = 0
    generations_pruned: int = 0
    locks_pruned: int = 0
    leftovers_pruned: int = 0
    lock_acquisitions: int = 0
    duration_ms: int = 0

    def counts(self) -> dict[str, int]:
        return msgspec.structs.asdict(self)


class LastSweep(msgspec.Struct, frozen=True, kw_only=True):
    """``last-sweep.json``: when the last sweep of a registry finished, and its counts."""

    finished_at: float
    counts: dict[str, int]


def read_last_sweep(registry: HeartbeatRegistry) -> LastSweep | None:
    """The last sweep's record, ``None`` when absent, unreadable or over its cap."""
    try:
        data = read_capped(registry.last_sweep_path, MAX_RECORD_BYTES)
        return None if data is None else msgspec.json.decode(data, type=LastSweep)
    except (OSError, msgspec.DecodeError, OversizedRecordError):
        return None


@dataclass
class _Snapshot:
    """What the scans saw: instance names present, and the stale files of each folder."""

    present: set[str] = field(default_factory=set)
    stale_heartbeats: list[str] = field(default_factory=list)
    stale_pid_map: list[int] = field(default_factory=list)
    stale_prompt_hashes: list[str] = field(default_factory=list)


def _scan(folder_fd: int | None, suffix: str, report: SweepReport, *, now: float,
          window: float, skip: Container[str] | None = None, regular_only: bool = True,
          listed: list[str] | None = None, leftovers: Entries | None = None,
          ) -> tuple[list[str], int]:
    """One listing of the folder open as ``folder_fd`` (``None``: it does not exist):
    ``(stale, irregular)``.

    Each visible ``*suffix`` entry not in ``skip`` (skipped before any stat) is
    stat'ed once and its stem added to ``listed``, if given; ``stale``: those whose
    scan stat says older than ``window`` (``now - mtime > window``), regular files
    only unless ``regular_only`` is false; ``irregular``: how many are not regular
    files. A folder or an entry the system
    refuses to read is counted ``unhandled`` and skipped. Temp files of writers
    met on the way are added to ``leftovers``, if given.

    This loop runs once per file of the registry, so it is one tight loop with
    locals: its Python work is what a sweep pays over a raw ``scandir`` + ``stat``.
    """
    stale: list[str] = []
    irregular = 0
    if folder_fd is None:
        return stale, irregular
    try:
        entries = os.scandir(folder_fd)
    except OSError:
        report.unhandled += 1
        return stale, irregular
    cut = -len(suffix)
    keep = None if listed is None else listed.append
    old, is_regular = stale.append, stat.S_ISREG
    with entries:
        try:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    if leftovers is not None and name.endswith(TEMP_SUFFIX):
                        leftovers.append((folder_fd, entry))
                    continue
                if not name.endswith(suffix):
                    continue
                stem = name[:cut]
                if skip is not None and stem in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError:
                    report.unhandled += 1
                    continue
                if keep is not None:
                    keep(stem)
                if is_regular(st.st_mode):
                    if now - st.st_mtime > window:
                        old(stem)
                else:
                    irregular += 1
                    if not regular_only and now - st.st_mtime > window:
                        old(stem)
        except OSError:
            report.unhandled += 1  # the listing itself failed part-way: skip the rest
    return stale, irregular


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


class _RootMoved(Exception):
    """The registry root's path stopped naming the folder the sweep holds open."""


class StaleSweep:
    """One pass over a registry. Build one per sweep and call :meth:`run`.

    :param stale_after: seconds without refresh before a heartbeat is a candidate.
    :param max_candidates: candidates taken through custody in this pass.
    :param emit: the host's ``emit`` (events from the telemetry catalog), or ``None``.
    :param hooks: interleaving callbacks for tests (:class:`SweepHooks`).
    :param clock: wall-clock time source, for tests.
    :param generation_retention: seconds an ended generation's record is kept.
    """

    def __init__(self, registry: HeartbeatRegistry, *, emit: Emit | None = None,
                 hooks: SweepHooks = NO_HOOKS, stale_after: float = STALE_AFTER_SECONDS,
                 max_candidates: int = MAX_CANDIDATES_PER_SWEEP,
                 clock: Callable[[], float] = time.time,
                 generation_retention: float = GENERATION_RETENTION_SECONDS) -> None:
        self.registry = registry
        self.emit = emit
        self.hooks = hooks
        self.stale_after = stale_after
        self.max_candidates = max_candidates
        self.clock = clock
        self.generation_retention = generation_retention
        self.report = SweepReport()
        self.pending: dict[str, PendingCustody] = {}
        self.journal = AuditJournal(registry)
        self.now = 0.0
        self.leftovers: Entries = []
        self.anchor: RegistryAnchor | None = None
        self.unlinker: Unlinker[DeleteFileResult] = Unlinker()
        self.spares = ManifestSpares(
            on_rewritten=lambda name: self.hooks.call("after_spare_rewrite", name))

    def run(self) -> SweepReport:
        """Sweep once. Raises :class:`~.errors.RegistryRefused` (nothing read or
        changed) when the registry root or one of its folders is a symlink, another
        user's or world-writable; a root moved mid-sweep stops it, ``refused: 1``."""
        require_custody()
        started, locks_before = time.monotonic(), LOCKS.acquisitions
        self.now = self.clock()
        anchor = RegistryAnchor.open(self.registry.root)
        if anchor is not None:
            with anchor:
                self.anchor = anchor
                try:
                    self._sweep()
                except _RootMoved:
                    self.report.refused += 1  # stopped: the lock files are another folder's
                self.report.lock_acquisitions = LOCKS.acquisitions - locks_before
                self.report.duration_ms = int((time.monotonic() - started) * 1000)
                if not self.report.refused:
                    self._keep_last_sweep(anchor.fd)
        if self.emit is not None:
            self.emit("custody.sweep_completed", **self.report.counts())
        return self.report

    def _sweep(self) -> None:
        assert self.anchor is not None
        self.pending = {kind: pending_custody(folder, dir_fd=folder_fd)
                        if (folder_fd := self.anchor.folder(kind)) is not None
                        else PendingCustody()
                        for kind, folder in self.registry.cache_dirs.items()}
        snapshot = self._snapshot()
        self.hooks.call("after_snapshot", str(self.registry.root))
        if self.pending["heartbeats"].unknown:
            # Dependents hang on heartbeat identities: with one unknown, touch nothing.
            self.report.protected_folders += 1
        else:
            try:
                with self.unlinker:
                    self._sweep_heartbeats(snapshot)
                    self._sweep_orphans(snapshot)
            finally:
                # Every queued step has run (the unlinker drained, or raised once all
                # had): no thread drops a manifest into a spare any more.
                self.spares.discard()
                # Sealing unlinks the sweep's single-record files by path: only while
                # that path still leads to this registry.
                if self.anchor.still_rooted():
                    self.journal.seal()
        recorded = self._prune_generations(snapshot)
        self._prune_locks(snapshot, recorded)
        self.report.leftovers_pruned = prune_entries(self.leftovers, now=self.now)

    def _keep_last_sweep(self, root_fd: int) -> None:
        record = LastSweep(finished_at=self.clock(), counts=self.report.counts())
        # Best effort, and disposable: a full disk must not fail the sweep.
        with contextlib.suppress(OSError):
            publish_at(root_fd, self.registry.last_sweep_path.name,
                       msgspec.json.encode(record), durable=False)

    # -- the verified folders --------------------------------------------------------

    def _folder(self, kind: str) -> int | None:
        assert self.anchor is not None
        return self.anchor.folder(kind)

    def _check_rooted(self) -> None:
        """Stop the sweep unless the root's path still names the folder held open:
        custody is the lock file *named by path*, so past that point it would be
        another folder's lock guarding this folder's files."""
        assert self.anchor is not None
        if not self.anchor.still_rooted():
            raise _RootMoved

    @contextlib.contextmanager
    def _custody(self, instance: str) -> Iterator[Custody]:
        """The instance's custody for the sweep, taken and kept only while the root's
        path names the folder held open (checked before, so no lock file is made in
        another folder, and after)."""
        self._check_rooted()
        with self.registry.custody_for_sweep(instance) as custody:
            self._check_rooted()
            yield custody

    def _heartbeat_present(self, instance: str) -> bool:
        """Whether anything lives at the instance's heartbeat name now (in the held folder)."""
        folder_fd = self._folder("heartbeats")
        if folder_fd is None:
            return False
        try:
            return lstat_at(folder_fd, f"{instance}.json") is not None
        except OSError:
            return True  # cannot tell: as good as present, nothing of it is pruned

    def _nothing_left(self, instance: str) -> bool:
        """Whether the instance has neither a heartbeat nor a generation record, in this
        registry still (the condition for dropping its lock file)."""
        assert self.anchor is not None
        if self._heartbeat_present(instance) or not self.anchor.still_rooted():
            return False
        generations_fd = self._folder("generations")
        try:
            return generations_fd is None or lstat_at(generations_fd,
                                                      f"{instance}.json") is None
        except OSError:
            return False

    def _read_record(self, kind: str, name: str, type_: type[_T]) -> _T | None:
        """A record of the held folder ``kind``, read up to its cap; ``None`` if absent.

        Raises :class:`OversizedRecordError` over the cap, ``RecordError`` when it is
        malformed, ``OSError`` when the system refuses (``ELOOP`` for a symlink).
        """
        folder_fd = self._folder(kind)
        if folder_fd is None:
            return None
        data = read_capped(name, MAX_RECORD_BYTES, dir_fd=folder_fd)
        if data is None:
            return None
        return decode_json(data, type_, what=str(self.registry.root / kind / name))

    # -- the cheap pass --------------------------------------------------------------

    def _snapshot(self) -> _Snapshot:
        snap = _Snapshot()
        now, window = self.now, self.stale_after
        stems: list[str] = []
        snap.stale_heartbeats, irregular = _scan(
            self._folder("heartbeats"), ".json", self.report, now=now, window=window,
            listed=stems, leftovers=self.leftovers)
        self.report.scanned += len(stems)
        self.report.kept_uncertain += irregular  # not a regular file: never a candidate
        snap.present = present = set(stems)
        stale, _ = _scan(self._folder("pid-map"), ".json", self.report, now=now,
                         window=window, leftovers=self.leftovers)
        snap.stale_pid_map = [int(stem) for stem in stale if stem.isdigit()]
        # A prompt hash whose instance has a heartbeat is judged with that heartbeat:
        # only the others (orphans) need their stat.
        snap.stale_prompt_hashes, _ = _scan(
            self._folder("prompt-hash"), ".txt", self.report, now=now, window=window,
            skip=present, leftovers=self.leftovers)
        return snap

    # -- stale heartbeats ------------------------------------------------------------

    def _sweep_heartbeats(self, snap: _Snapshot) -> None:
        protected = self.pending["heartbeats"].sources
        taken = 0
        for instance in sorted(snap.stale_heartbeats):
            if f"{instance}.json" in protected:
                self.report.protected += 1
                continue
            if taken >= self.max_candidates:
                self.report.deferred += 1
                continue
            taken += 1
            self.report.candidates += 1
            try:
                with contextlib.ExitStack() as held:
                    custody = held.enter_context(self._custody(instance))
                    self._judge(instance, custody, held)
            except CustodyRefused as exc:
                if exc.reason == "held":
                    self.report.kept_live += 1
                else:
                    self.report.kept_uncertain += 1
            except _SKIPPED:
                self.report.unhandled += 1  # refused by the system: skip it, go on
            except CustodyError:
                self.report.kept_uncertain += 1  # a file name that is no instance's

    def _judge(self, instance: str, custody: Custody, held: contextlib.ExitStack) -> None:
        """Judge the stale heartbeat and delete it if its owner is proven dead.

        Its private unlink is queued (:mod:`.unlinker`) with the instance's custody,
        taken over from ``held``: the dependents are pruned, still under that custody,
        once the batch has run and the heartbeat is confirmed gone.
        """
        path = self.registry.heartbeat_path(instance)
        folder_fd = self._folder("heartbeats")
        assert folder_fd is not None  # the instance was met by the scan of that folder
        try:
            captured = capture_at(folder_fd, path.name, where=str(path), limit=MAX_RECORD_BYTES)
        except OversizedRecordError:
            self.report.oversized += 1  # kept unread: no judgement rests on a runaway file
            return
        except (UnsafePathError, UnstableRevisionError):
            self.report.kept_uncertain += 1
            return
        except FileAccessError:
            self.report.unhandled += 1
            return
        if captured is None:
            self.report.vanished += 1
            return
        revision, data = captured
        if self.now - revision.mtime_ns / 1e9 <= self.stale_after:
            self.report.kept_fresh += 1
            return
        try:
            heartbeat = msgspec.json.decode(data, type=Heartbeat)
        except msgspec.DecodeError:
            self.report.kept_uncertain += 1
            return
        if heartbeat.instance != instance or heartbeat.version > HEARTBEAT_VERSION:
            self.report.kept_uncertain += 1  # another instance's, or a newer writer's record
            return
        if self._generation_ended(instance, heartbeat):
            liveness = Liveness.DEAD  # its end wrote a terminal record: nothing to probe
        else:
            owns_our_lock = heartbeat.owner.lock == str(custody.lock_path)
            liveness = owner_liveness(heartbeat.owner,
                                      lock_free=True if owns_our_lock else None)
        if liveness is Liveness.ALIVE:
            self.report.kept_live += 1
            return
        if liveness is not Liveness.DEAD:
            self.report.kept_uncertain += 1
            return
        self.hooks.call("after_stale_read", instance)
        witness = heartbeat.generation_id if is_generation_id(heartbeat.generation_id) else None
        pid = heartbeat.owner.pid

        def unlink_later(step: Callable[[], DeleteFileResult]) -> None:
            release = held.pop_all()  # the instance stays held until its dependents are done
            self.unlinker.submit(step, functools.partial(
                self._heartbeat_unlinked, instance, pid, custody, release))

        result = delete_file_if_unchanged(
            path, revision, self._auditor(instance, witness), owner_lock=custody.lock_path,
            on_step=lambda step: self.hooks.call("before_unlink", instance)
            if step == "confirmed" else None, dir_fd=folder_fd, defer_unlink=unlink_later,
            spares=self.spares,
        )
        if result.outcome == "unlinking":
            return
        self._count(result.outcome)
        if result.deleted:  # unlinked here after all (no descriptor to hand it over with)
            self._after_heartbeat(instance, pid, custody)

    def _heartbeat_unlinked(self, instance: str, pid: int, custody: Custody,
                            release: contextlib.ExitStack, result: DeleteFileResult) -> None:
        """A queued heartbeat unlink has run: count it, and only if the heartbeat is
        gone prune its dependents, under the custody held since it was judged."""
        with release:
            self._count(result.outcome)
            if not result.deleted:
                return  # retained: its pin protects the dependents
            assert self.anchor is not None
            if not self.anchor.still_rooted():
                return  # the root moved: the sweep stops at what it has done
            try:
                self._after_heartbeat(instance, pid, custody)
            except _SKIPPED:
                self.report.unhandled += 1
            except CustodyError:
                self.report.kept_uncertain += 1

    def _after_heartbeat(self, instance: str, pid: int, custody: Custody) -> None:
        if self._prune_dependents(instance, pid, custody):
            custody.discard_lock_file_if(functools.partial(self._lock_unneeded, instance))

    def _generation_ended(self, instance: str, heartbeat: Heartbeat) -> bool:
        """Whether the heartbeat's generation is recorded ended (read under the instance's
        custody, which every generation writer holds), for an owner of this process space
        (the outer gate: a foreign record is never acted on). Unreadable: not ended."""
        if not current_host().same_process_space(heartbeat.owner.host):
            return False
        try:
            record = self._read_record("generations", f"{instance}.json", GenerationRecord)
        except (OversizedRecordError, RecordError, OSError):
            return False
        return (record is not None and record.instance == instance
                and record.generation_id == heartbeat.generation_id and record.status != "live")

    def _auditor(self, instance: str, witness: str | None) -> Callable[[FileRevision], bool]:
        def audit(pinned: FileRevision) -> bool:
            self.hooks.call("before_audit", instance)
            outcome = record_live_sweep_observation(
                self.registry, instance, observed=pinned, expected_generation_id=witness,
                emit=self.emit, hooks=self.hooks, journal=self.journal)
            if outcome.recorded:
                self.report.observations += 1
                return True
            assert outcome.reason is not None
            persisted = record_sweep_unrecorded(
                self.registry, instance, reason=outcome.reason, observed=pinned,
                generation_id=witness, emit=self.emit, journal=self.journal)
            self.report.diagnostics += persisted
            return persisted  # neither audit nor diagnostic: keep the cache

        return audit

    def _count(self, outcome: str) -> None:
        field_name = {"deleted": "deleted", "kept-changed": "kept_changed",
                      "kept-refused": "kept_refused", "restored": "kept_error",
                      "retained": "retained", "kept-error": "unhandled",
                      "kept-unsupported": "unsupported"}[outcome]
        setattr(self.report, field_name, getattr(self.report, field_name) + 1)

    # -- dependents ----------------------------------------------------------------

    def _prune_dependents(self, instance: str, pid: int, custody: Custody) -> bool:
        """Prune the instance's pid-map entry and prompt hash; True if none is left."""
        pid_map = self._prune(self.registry.pid_map_path(pid), instance, "pid-map", custody)
        prompt = self._prune(self.registry.prompt_hash_path(instance), instance, "prompt-hash",
                             custody)
        return pid_map and prompt

    def _prune(self, path: Path, owner: str, kind: str, custody: Custody, *,
               orphan: bool = False) -> bool:
        """Delete ``path`` if it still belongs to ``owner`` and the owner is still absent
        once it is pinned. True when nothing of ``owner``'s is left at ``path``.

        An ``orphan`` (its owner had no heartbeat in the scan) must also still be stale.
        """
        pending = self.pending[kind]
        if pending.unknown or path.name in pending.sources:
            self.report.dependents_kept += 1
            return False
        folder_fd = self._folder(kind)
        if folder_fd is None:
            return True  # no such folder: nothing of the owner's there
        try:
            captured = capture_at(folder_fd, path.name, where=str(path), limit=MAX_RECORD_BYTES)
        except OversizedRecordError:
            self.report.oversized += 1
            return False
        except (UnsafePathError, UnstableRevisionError):
            self.report.dependents_kept += 1
            return False
        except FileAccessError:
            self.report.unhandled += 1
            return False
        if captured is None:
            return True
        revision, data = captured
        if orphan and self.now - revision.mtime_ns / 1e9 <= self.stale_after:
            return False  # republished since the scan: not an orphan's any more
        if kind == "pid-map":
            try:
                entry = msgspec.json.decode(data, type=PidMapEntry)
            except msgspec.DecodeError:
                self.report.dependents_kept += 1
                return False
            if entry.instance != owner:
                return True  # reassigned to another instance: not ours to prune
        self.hooks.call("after_dependent_read", str(path))

        def owner_still_absent(_pinned: FileRevision) -> bool:
            self.hooks.call("after_dependent_pin", str(path))
            return not self._heartbeat_present(owner)

        def unlink(step: Callable[[], DeleteFileResult]) -> None:
            self.unlinker.submit(functools.partial(self._unlink_dependent, step, str(path)),
                                 self._count_dependent)

        result = delete_file_if_unchanged(path, revision, owner_still_absent,
                                          owner_lock=custody.lock_path, dir_fd=folder_fd,
                                          defer_unlink=unlink, spares=self.spares)
        if result.outcome == "unlinking":
            return True  # confirmed: nothing of the owner's is left at the path
        self._count_dependent(result)
        return False

    def _unlink_dependent(self, step: Callable[[], DeleteFileResult],
                          path: str) -> DeleteFileResult:
        """A dependent's private unlink, in one of the unlinker's threads."""
        self.hooks.call("before_dependent_unlink", path)
        return step()

    def _count_dependent(self, result: DeleteFileResult) -> None:
        if result.deleted:
            self.report.dependents_deleted += 1
        elif result.outcome in ("kept-error", "kept-unsupported"):
            self._count(result.outcome)
        else:
            self.report.dependents_kept += 1

    # -- orphans ---------------------------------------------------------------------

    def _sweep_orphans(self, snap: _Snapshot) -> None:
        protected = {name.removesuffix(".json") for name in self.pending["heartbeats"].sources}
        for pid in sorted(snap.stale_pid_map):
            if _pid_exists(pid):
                continue  # the process lives: its entry is not an orphan's
            path = self.registry.pid_map_path(pid)
            try:
                entry = self._read_record("pid-map", path.name, PidMapEntry)
            except OversizedRecordError:
                self.report.oversized += 1
                continue
            except RecordError:
                self.report.dependents_kept += 1
                continue
            except OSError:
                self.report.unhandled += 1  # mode 000, I/O error: skip it, go on
                continue
            if entry is None or entry.instance in snap.present or entry.instance in protected:
                continue
            self._prune_orphan(path, entry.instance, "pid-map")
        for instance in sorted(snap.stale_prompt_hashes):
            if instance in protected:
                continue
            try:
                path = self.registry.prompt_hash_path(instance)
            except CustodyError:
                self.report.dependents_kept += 1  # a file name that is no instance's
                continue
            self._prune_orphan(path, instance, "prompt-hash")

    def _prune_orphan(self, path: Path, owner: str, kind: str) -> None:
        try:
            with self._custody(owner) as custody:
                self._prune(path, owner, kind, custody, orphan=True)
                custody.discard_lock_file_if(functools.partial(self._lock_unneeded, owner))
        except _SKIPPED:
            self.report.unhandled += 1
        except CustodyError:
            # Refused custody, or a name that is no instance's: keep the file.
            self.report.dependents_kept += 1

    def _lock_unneeded(self, instance: str) -> bool:
        """Whether the instance's lock file guards nothing any more: no heartbeat (the
        lock file is the session's witness while one lives), and still this registry."""
        assert self.anchor is not None
        return not self._heartbeat_present(instance) and self.anchor.still_rooted()

    # -- finished generations and dead sessions' leftovers ---------------------------

    def _prune_generations(self, snap: _Snapshot) -> set[str]:
        """Prune records of generations that changed over the retention ago and whose
        heartbeat is gone, each under its instance's custody (every generation
        writer holds it, so the record read there cannot change under us). Returns
        the instances without a heartbeat that have a record (pruned or not)."""
        stems: list[str] = []
        expired, _ = _scan(self._folder("generations"), ".json", self.report, now=self.now,
                           window=self.generation_retention, skip=snap.present,
                           regular_only=False, listed=stems)
        recorded = set(stems)
        for instance in expired[:self.max_candidates]:
            try:
                with self._custody(instance) as custody:
                    if self._prune_generation(instance):
                        custody.discard_lock_file_if(functools.partial(
                            self._lock_unneeded, instance))
            except _SKIPPED:
                self.report.unhandled += 1
            except CustodyError:
                continue  # held (a session starts), or a name that is no instance's
        return recorded

    def _prune_generation(self, instance: str) -> bool:
        """Prune the record if it is past the retention with no heartbeat: an ended
        generation's, or a ``live`` one left by a crashed session. For the latter the
        custody the caller holds is the proof of death: every session holds its
        instance's lock for its whole life, and the kernel frees it only at death."""
        name = f"{instance}.json"
        try:
            record = self._read_record("generations", name, GenerationRecord)
        except OversizedRecordError:
            self.report.oversized += 1
            return False
        except RecordError:
            return False  # malformed: evidence for a person, not ours to drop
        if record is None or record.instance != instance:
            return False
        if self.now - record.changed_at <= self.generation_retention:
            return False
        if self._heartbeat_present(instance) or name in self.pending["heartbeats"].sources:
            return False  # a heartbeat (or its pin) still names the generation
        generations_fd = self._folder("generations")
        assert generations_fd is not None
        os.unlink(name, dir_fd=generations_fd)
        self.report.generations_pruned += 1
        return True

    def _prune_locks(self, snap: _Snapshot, recorded: set[str]) -> None:
        """Prune lock files of instances with neither a heartbeat nor a generation
        record, older than the stale window, whose lock this sweep can take (so no
        session or writer holds it: their owner is gone). Instances with a heartbeat
        or a record are skipped unread: a registry of live sessions costs no stat."""
        budget = self.max_candidates
        pinned = self.pending["heartbeats"].sources
        stale, _ = _scan(self._folder("locks"), ".lock", self.report, now=self.now,
                         window=self.stale_after,
                         skip=snap.present | recorded if recorded else snap.present)
        for instance in stale:
            if budget <= 0:
                return
            if f"{instance}.json" in pinned:
                continue
            budget -= 1
            try:
                with self._custody(instance) as custody:
                    custody.discard_lock_file_if(functools.partial(self._nothing_left,
                                                                   instance))
            except _SKIPPED:
                self.report.unhandled += 1
                continue
            except CustodyError:
                continue  # held by a live owner, or a name that is no instance's
            self.report.locks_pruned += custody.lock_file_discarded


def sweep_stale_heartbeats(registry: HeartbeatRegistry, **options: Any) -> SweepReport:
    """Run one :class:`StaleSweep` over ``registry`` (options as its constructor's)."""
    return StaleSweep(registry, **options).run()
