"""The private custody folder beside a cache folder's files, and what it holds.

``<folder>/.custody`` (mode 0700, owned by us; a symlink or a folder others can
read is refused) holds, for each deletion in flight, an intent manifest
``<op>.json`` and, once the live name was moved there, the pin ``<op>.pin``.
Manifests are published by atomic rename *before* the pin's rename, so a process
killed at any step leaves a pin only beside its whole manifest. They are not
fsynced: the guarantee covers a process's death, and the kernel keeps every write
a dead process made (seed 001 does not establish recovery from power loss). Six
fsyncs per stale heartbeat were most of a sweep's cost.

:func:`pending_custody` reads a private folder without acting, for sweeps and
status: which source names an operation in flight protects, and whether an
operation of unknown identity protects the whole folder. :func:`list_operations`
describes each operation for a person deciding what to release.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from hostcore_file_custody.errors import CustodyError, OversizedRecordError, UnsafePathError
from hostcore_file_custody.fsio import DIR_MODE, FILE_MODE, publish_at, temp_name
from hostcore_file_custody.limits import MAX_MANIFEST_BYTES
from hostcore_file_custody.owner import Liveness, OwnerRecord, owner_liveness
from hostcore_file_custody.revision import (
    PRIVATE_DIR_NAME,
    FileRevision,
    capture_at,
    is_single_name,
    lstat_at,
    open_dir,
)

MANIFEST_SUFFIX = ".json"
PIN_SUFFIX = ".pin"
RECOVERY_LOCK_NAME = ".recovery.lock"
# Where released operations are kept as evidence, beside the private folder.
RELEASED_DIR_NAME = ".custody-released"


class DeletionManifest(msgspec.Struct, frozen=True, kw_only=True):
    """The intent recorded before a file is pinned (``<op>.json`` in the private folder)."""

    op: str
    state: Literal["intent", "retained"]
    source_name: str
    source_dir: str
    source_dir_dev: int
    source_dir_ino: int
    expected: FileRevision
    creator: OwnerRecord
    created_at: float
    reason: str = ""


class PendingCustody(msgspec.Struct, frozen=True, kw_only=True):
    """What a private folder holds now, read without acting (for sweeps and status).

    ``sources`` are the file names with a pin or an intent in flight (including
    those named by manifests written for another folder, as after a ``cp -a``
    restore); ``unknown`` is true when some pinned file's identity cannot be
    read, which protects the whole folder. A malformed manifest with nothing
    pinned hides no file: it is counted, not protecting (``oversized`` counts
    those of them refused unread for their size). ``foreign`` counts
    manifests of another host, platform or PID namespace, the oldest
    ``oldest_foreign_seconds`` old.
    """

    sources: frozenset[str] = frozenset()
    unknown: bool = False
    manifests: int = 0
    pins: int = 0
    retained: int = 0
    malformed: int = 0
    oversized: int = 0
    other_folder: int = 0
    foreign: int = 0
    oldest_foreign_seconds: float | None = None


class OperationView(msgspec.Struct, frozen=True, kw_only=True):
    """One operation in a private folder, as a person deciding what to release sees it.

    ``owner`` is the creator's liveness (``alive``, ``dead``, ``unknown``,
    ``foreign``) or ``unreadable``; ``protects`` is ``source`` (only its source
    name), ``folder`` (identity unknown and something pinned) or ``nothing``.
    ``location`` is the path to pass to ``recover --release``.
    """

    op: str
    source_path: str | None
    state: str
    owner: str
    age_seconds: float | None
    pinned: bool
    protects: Literal["source", "folder", "nothing"]
    location: str
    note: str = ""


# -- the private folder -------------------------------------------------------------


def check_private(fd: int, where: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{where}: not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise UnsafePathError(f"{where}: private custody folder is not owner-only")


def open_private_dir(parent_fd: int, parent: Path, *, create: bool,
                     name: str = PRIVATE_DIR_NAME) -> int | None:
    """Open (creating with mode 0700 if asked) the private folder beside ``parent``'s files.

    ``None`` when it does not exist and ``create`` is false. Raises
    :class:`UnsafePathError` when it is a symlink, not a folder, or readable by
    others; ``OSError`` when it cannot be made (no space, permission).
    """
    where = parent / name
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
    try:
        fd = open_dir(Path(name), dir_fd=parent_fd)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        check_private(fd, where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def same_private_dir(parent_fd: int, private_fd: int) -> bool:
    """Whether the private folder's name still leads to the folder we hold open."""
    named = lstat_at(parent_fd, PRIVATE_DIR_NAME)
    held = os.fstat(private_fd)
    return named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def new_op() -> str:
    return f"op_{time.time_ns():x}_{os.urandom(6).hex()}"


def write_manifest(private_fd: int, manifest: DeletionManifest,
                   spares: ManifestSpares | None = None) -> None:
    """Publish ``manifest`` atomically: whole or absent to every reader, and present
    before this process renames the pin (not fsynced: see the module's note); in a
    spare's file when ``spares`` keeps one for this folder."""
    name, data = f"{manifest.op}{MANIFEST_SUFFIX}", msgspec.json.encode(manifest)
    if spares is None:
        publish_at(private_fd, name, data, durable=False)
    else:
        spares.write(private_fd, name, data)


def drop(private_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=private_fd)


# Dropped manifests kept per private folder for rewriting: enough for the deletions a
# sweep has in flight at once (the unlinker's batch of 64, three folders), few enough
# that the files left until the sweep's end are nothing.
SPARES_PER_FOLDER = 128
_SPARE_OPEN = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_NONBLOCK", 0)


class ManifestSpares:
    """Dropped manifests' files, kept under hidden names and rewritten as the next
    manifests of the same private folder, so that a sweep creates (and frees) a file
    per deletion in flight rather than per deletion.

    Why: on ext4 without a journal, allocating an inode skips every free inode of its
    group freed in the last 30 seconds, one by one (``recently_deleted``), so a sweep
    that creates a manifest and frees one for each of 3,000 deletions pays a walk that
    grows with every deletion: most of what a stale heartbeat cost at 100,000
    heartbeats (file creation 30 us in the first sweep, 140-290 us by the third).

    Why it is as safe as a new temp file: a spare is named like one
    (``.spare.<token>.tmp``), which no reader, recovery or status takes for an
    operation (:func:`operations` skips hidden names) and
    :mod:`.maintenance` prunes by age. Dropping a manifest into a spare is one
    rename: its name goes as it would by unlink. Rewriting a spare happens under its
    hidden name, then one rename (never over an existing manifest but the one
    :meth:`write` replaces, as :func:`~.fsio.publish_at` would) makes the whole
    manifest appear: a process killed at any point leaves the name absent or whole,
    plus at most a hidden file that carries nothing anyone reads. Nothing is fsynced,
    as before (see the module's note). A spare that is gone (pruned) or is not a
    plain file of ours with one link is never written: a new temp file is.

    Steps of a sweep's unlinker threads drop manifests while the sweep writes new
    ones: each folder's spares are a ``deque`` (atomic appends and pops), its entry
    made under a lock. :meth:`discard` unlinks the spares left: a sweep leaves none.
    ``on_rewritten(name)`` is called once a spare holds the next manifest's bytes,
    before its rename (a test's kill point).
    """

    def __init__(self, *, limit: int = SPARES_PER_FOLDER,
                 on_rewritten: Callable[[str], None] | None = None) -> None:
        self._limit = limit
        self._on_rewritten = on_rewritten
        self._folders: dict[tuple[int, int], tuple[int, deque[str]]] = {}
        self._lock = threading.Lock()
        self.rewritten = 0
        self.created = 0

    def _folder(self, private_fd: int) -> tuple[int, deque[str]]:
        st = os.fstat(private_fd)
        key = (st.st_dev, st.st_ino)
        entry = self._folders.get(key)
        if entry is None:
            with self._lock:
                entry = self._folders.get(key)
                if entry is None:
                    entry = self._folders[key] = (os.dup(private_fd), deque())
        return entry

    def write(self, private_fd: int, name: str, data: bytes) -> None:
        """Publish ``data`` as ``name`` in the private folder, in a spare's file when
        one is kept; raises ``OSError`` with no spare or temp file left half-written."""
        _, spares = self._folder(private_fd)
        while spares:
            try:
                spare = spares.popleft()
            except IndexError:
                break  # another thread took the last one
            if self._rewrite(private_fd, spare, name, data):
                self.rewritten += 1
                return
        publish_at(private_fd, name, data, durable=False)
        self.created += 1

    def _rewrite(self, private_fd: int, spare: str, name: str, data: bytes) -> bool:
        try:
            fd = os.open(spare, _SPARE_OPEN, FILE_MODE, dir_fd=private_fd)
        except FileNotFoundError:
            return False  # pruned meanwhile: a new file it is
        try:
            try:
                st = os.fstat(fd)
                if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1
                        or st.st_uid != os.geteuid()):
                    return False  # not the file we kept: left alone, never written
                view = memoryview(data)
                offset = 0
                while offset < len(view):
                    offset += os.pwrite(fd, view[offset:], offset)
                if st.st_size > len(data):
                    os.ftruncate(fd, len(data))  # never to zero: see the note below
            finally:
                os.close(fd)
            if self._on_rewritten is not None:
                self._on_rewritten(name)
            os.rename(spare, name, src_dir_fd=private_fd, dst_dir_fd=private_fd)
        except FileNotFoundError:
            return False  # pruned between the write and the rename
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(spare, dir_fd=private_fd)
            raise
        # Overwritten in place, not truncated to zero first: ext4 flushes the data of a
        # file truncated to zero and rewritten when it is closed (auto_da_alloc).
        return True

    def drop(self, private_fd: int, name: str) -> None:
        """Drop the manifest ``name``: keep its file as a spare, or unlink it when this
        folder has enough (as :func:`drop`: absent already is fine)."""
        _, spares = self._folder(private_fd)
        if len(spares) >= self._limit:
            drop(private_fd, name)
            return
        spare = temp_name("spare")
        with contextlib.suppress(FileNotFoundError):
            os.rename(name, spare, src_dir_fd=private_fd, dst_dir_fd=private_fd)
            spares.append(spare)

    def discard(self) -> None:
        """Unlink every spare left and let go of the folders. Best effort: one left
        behind is a temp file that :mod:`.maintenance` prunes by age."""
        with self._lock:
            folders, self._folders = self._folders, {}
        for folder_fd, spares in folders.values():
            try:
                for spare in spares:
                    with contextlib.suppress(OSError):
                        os.unlink(spare, dir_fd=folder_fd)
            finally:
                os.close(folder_fd)


def operations(private_fd: int) -> tuple[set[str], set[str]]:
    """The operation ids with a manifest, and those with a pin (hidden names skipped)."""
    manifests: set[str] = set()
    pins: set[str] = set()
    for entry in os.listdir(private_fd):
        if entry.startswith("."):
            continue  # the recovery lock, probes and temp files (never a pin's intent)
        if entry.endswith(MANIFEST_SUFFIX):
            manifests.add(entry[: -len(MANIFEST_SUFFIX)])
        elif entry.endswith(PIN_SUFFIX):
            pins.add(entry[: -len(PIN_SUFFIX)])
        else:
            pins.add(entry)  # an unknown file is evidence of an unknown operation
    return manifests, pins


class ManifestProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Why a manifest cannot be trusted; ``oversized`` when it was refused unread."""

    reason: str
    oversized: bool = False


def read_manifest(private_fd: int, op: str, where: Path) -> DeletionManifest | None:
    """The manifest of ``op``, or ``None`` when it is absent, torn, unreadable,
    oversized or inconsistent (see :func:`load_manifest` for why)."""
    loaded = load_manifest(private_fd, op, where)
    return loaded if isinstance(loaded, DeletionManifest) else None


def load_manifest(private_fd: int, op: str, where: Path) -> DeletionManifest | ManifestProblem:
    """The manifest of ``op``, or why it cannot be trusted.

    It is read only up to :data:`MAX_MANIFEST_BYTES`, and its ``source_name``
    must be one plain file name: a manifest naming ``../x`` or ``/abs/x`` would
    make recovery act outside the folder, so it is refused as malformed.
    """
    try:
        captured = capture_at(private_fd, f"{op}{MANIFEST_SUFFIX}", where=str(where),
                              limit=MAX_MANIFEST_BYTES)
        if captured is None:
            return ManifestProblem(reason="the manifest is gone")
        manifest = msgspec.json.decode(captured[1], type=DeletionManifest)
    except OversizedRecordError as exc:
        return ManifestProblem(reason=f"the manifest is {exc.size} bytes, over the "
                                      f"{exc.limit}-byte cap: not read", oversized=True)
    except (msgspec.DecodeError, CustodyError):
        return ManifestProblem(reason="the manifest cannot be read")
    if manifest.op != op:
        return ManifestProblem(reason="the manifest names another operation")
    if not is_single_name(manifest.source_name):
        return ManifestProblem(reason="the manifest's source is not a plain file name of "
                                      "its folder")
    return manifest


def file_age(dir_fd: int, name: str, now: float) -> float | None:
    try:
        st = lstat_at(dir_fd, name)
    except OSError:
        return None
    return None if st is None else max(0.0, now - st.st_mtime)


# -- reading without acting ---------------------------------------------------------


def pending_custody(directory: str | os.PathLike[str], *,
                    dir_fd: int | None = None) -> PendingCustody:
    """What the private folder beside ``directory``'s files holds, without acting on it.

    A private folder that cannot be read counts as ``unknown``: it protects its folder.
    ``dir_fd``, when given, is ``directory`` already open (a sweep's verified descriptor).
    """
    directory = Path(directory)
    try:
        dir_fd = open_dir(directory) if dir_fd is None else os.dup(dir_fd)
    except FileNotFoundError:
        return PendingCustody()
    except (UnsafePathError, OSError):
        return PendingCustody(unknown=True)
    try:
        try:
            private_fd = open_private_dir(dir_fd, directory, create=False)
        except (UnsafePathError, OSError):
            return PendingCustody(unknown=True)
        if private_fd is None:
            return PendingCustody()
        try:
            return _pending(private_fd, directory, os.fstat(dir_fd))
        except OSError:
            return PendingCustody(unknown=True)
        finally:
            os.close(private_fd)
    finally:
        os.close(dir_fd)


def _pending(private_fd: int, directory: Path, dir_st: os.stat_result) -> PendingCustody:
    manifests, pins = operations(private_fd)
    sources: set[str] = set()
    unknown = bool(pins - manifests)
    retained = malformed = oversized = other_folder = foreign = 0
    oldest_foreign: float | None = None
    now = time.time()
    for op in manifests:
        manifest = load_manifest(private_fd, op, directory / PRIVATE_DIR_NAME / op)
        if not isinstance(manifest, DeletionManifest):
            malformed += 1
            oversized += manifest.oversized
            unknown = unknown or op in pins
            continue
        sources.add(manifest.source_name)
        if (manifest.source_dir_dev, manifest.source_dir_ino) != (dir_st.st_dev, dir_st.st_ino):
            other_folder += 1
            continue
        retained += manifest.state == "retained"
        if owner_liveness(manifest.creator, probe=False) is Liveness.FOREIGN:
            foreign += 1
            age = max(0.0, now - manifest.created_at)
            oldest_foreign = age if oldest_foreign is None else max(oldest_foreign, age)
    return PendingCustody(sources=frozenset(sources), unknown=unknown, manifests=len(manifests),
                          pins=len(pins), retained=retained, malformed=malformed,
                          oversized=oversized,
                          other_folder=other_folder, foreign=foreign,
                          oldest_foreign_seconds=oldest_foreign)


def list_operations(directory: str | os.PathLike[str]) -> list[OperationView]:
    """Every operation in the private folder beside ``directory``'s files, described.

    Takes no lock and probes no lock: an owner whose death only its lock could
    prove reads ``unknown`` here.
    """
    directory = Path(directory)
    try:
        dir_fd = open_dir(directory)
    except (CustodyError, OSError):
        return []
    try:
        try:
            private_fd = open_private_dir(dir_fd, directory, create=False)
        except (CustodyError, OSError):
            return []
        if private_fd is None:
            return []
        try:
            return _describe(private_fd, directory, os.fstat(dir_fd))
        except OSError:
            return []
        finally:
            os.close(private_fd)
    finally:
        os.close(dir_fd)


def _describe(private_fd: int, directory: Path, dir_st: os.stat_result) -> list[OperationView]:
    private = directory / PRIVATE_DIR_NAME
    manifests, pins = operations(private_fd)
    now = time.time()
    views = [
        OperationView(op=op, source_path=None, state="no-manifest", owner="unreadable",
                      age_seconds=file_age(private_fd, _pin_name(private_fd, op), now),
                      pinned=True, protects="folder",
                      location=str(private / _pin_name(private_fd, op)),
                      note="a pinned file without a manifest: its source is unknown")
        for op in sorted(pins - manifests)
    ]
    for op in sorted(manifests):
        pinned = op in pins
        manifest_name = f"{op}{MANIFEST_SUFFIX}"
        manifest = load_manifest(private_fd, op, private / manifest_name)
        if not isinstance(manifest, DeletionManifest):
            views.append(OperationView(
                op=op, source_path=None, state="malformed", owner="unreadable",
                age_seconds=file_age(private_fd, manifest_name, now), pinned=pinned,
                protects="folder" if pinned else "nothing", location=str(private / manifest_name),
                note=manifest.reason))
            continue
        other = (manifest.source_dir_dev, manifest.source_dir_ino) != (dir_st.st_dev,
                                                                        dir_st.st_ino)
        views.append(OperationView(
            op=op, source_path=str(directory / manifest.source_name), state=manifest.state,
            owner=owner_liveness(manifest.creator, probe=False).value,
            age_seconds=max(0.0, now - manifest.created_at), pinned=pinned, protects="source",
            location=str(private / manifest_name),
            note="written for another folder (a copied or restored registry?)" if other
            else manifest.reason))
    return views


def _pin_name(private_fd: int, op: str) -> str:
    """The name under which an operation without a manifest is pinned."""
    return f"{op}{PIN_SUFFIX}" if lstat_at(private_fd, f"{op}{PIN_SUFFIX}") else op
