"""Delete exactly the bytes that were observed, and recover deletions a crash interrupted.

:func:`delete_file_if_unchanged` never unlinks the original path. It records an
intent manifest in a private folder beside the file (``.custody``, mode 0700,
manifests 0600), moves the live name into that folder with one atomic rename
(the *pin*), and only then decides, looking at the pinned inode rather than at
a path a writer may have republished:

1. the pinned file must be the expected revision, else it is put back;
2. ``validate(pinned)`` must agree, else it is put back;
3. the pin is checked again just before the private unlink.

Putting back is a hard link from the pin to the original name, which fails
rather than overwrite a newer file published there meanwhile; then the pinned
bytes stay in the private folder (``retained``) with their manifest, and the
result names that recovery location.

:func:`recover_interrupted_file_deletions` finishes or undoes deletions whose
process died part-way. It acts only on manifests created on this host, platform
and PID namespace whose creator is proven dead (or that their creator marked
``retained``); anything foreign, alive, unknown or malformed is kept.

The protocol covers the death of a process, not a power cut: manifests are
written atomically but not fsynced (see ``docs/file-custody.md``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from hostcore.atomic import atomic_write
from hostcore.records import encode_json
from hostcore_file_custody.errors import CustodyRefused, UnsafePathError, UnstableRevisionError
from hostcore_file_custody.locks import lock_exclusive
from hostcore_file_custody.owner import Liveness, OwnerRecord, current_owner, owner_liveness
from hostcore_file_custody.revision import (
    PRIVATE_DIR_NAME,
    FileRevision,
    capture_at,
    identity_matches,
    lstat_at,
    open_dir,
    safe_name,
)

PRIVATE_DIR_MODE = 0o700
MANIFEST_SUFFIX = ".json"
PIN_SUFFIX = ".pin"
RECOVERY_LOCK_NAME = ".recovery.lock"

DeleteOutcome = Literal["deleted", "kept-changed", "kept-refused", "restored", "retained"]
RecoveryOutcome = Literal[
    "deleted",  # the interrupted deletion was completed (validate agreed)
    "restored",  # the pinned bytes are back at the source path
    "cleared",  # nothing was pinned (or the pin was already gone): the manifest was dropped
    "retained",  # restoring collided with a newer file or failed: pinned bytes kept
    "kept-foreign",  # created on another host, platform or PID namespace
    "kept-live",  # its creator is alive
    "kept-unknown-owner",  # its creator's liveness cannot be proven
    "kept-malformed",  # the manifest cannot be read: identity unknown
    "kept-unknown",  # a pin with no manifest, or a manifest for another directory
    "kept-busy",  # another recovery of this folder is running
    "kept-error",  # the pin could not be read, or validate raised
]
# Outcomes after which nothing of the operation is left in the private folder.
RESOLVED_OUTCOMES: frozenset[str] = frozenset({"deleted", "restored", "cleared"})

StepHook = Callable[[str], None]


class DeleteFileResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`delete_file_if_unchanged` did.

    ``outcome``: ``deleted``; ``kept-changed`` (the path did not hold the expected
    revision; anything pinned was put back); ``kept-refused`` (``validate`` said
    no; put back); ``restored`` (an error stopped the deletion; put back);
    ``retained`` (putting back was impossible: the pinned bytes stay at
    ``recovery_location``).
    """

    deleted: bool
    outcome: DeleteOutcome
    recovery_location: str | None = None
    reason: str = ""


class FileRecoveryResult(msgspec.Struct, frozen=True, kw_only=True):
    """What recovery did with one interrupted deletion.

    ``source_path`` is ``None`` when the operation's identity is unknown (a
    malformed manifest, a pin without a manifest): then the whole folder must be
    treated as protected.
    """

    source_path: str | None
    outcome: RecoveryOutcome
    recovery_location: str | None = None
    reason: str = ""

    @property
    def resolved(self) -> bool:
        return self.outcome in RESOLVED_OUTCOMES


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

    ``sources`` are the file names with a pin or an intent in flight; ``unknown``
    is true when some operation's identity cannot be read, which protects the
    whole folder.
    """

    sources: frozenset[str] = frozenset()
    unknown: bool = False
    manifests: int = 0
    pins: int = 0
    retained: int = 0
    malformed: int = 0


# -- the private folder -------------------------------------------------------------


def _check_private(fd: int, where: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{where}: not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise UnsafePathError(f"{where}: private custody folder is not owner-only")


def open_private_dir(parent_fd: int, parent: Path, *, create: bool) -> int | None:
    """Open (creating with mode 0700 if asked) the private folder beside ``parent``'s files.

    ``None`` when it does not exist and ``create`` is false. Raises
    :class:`UnsafePathError` when it is a symlink, not a folder, or readable by others.
    """
    where = parent / PRIVATE_DIR_NAME
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(PRIVATE_DIR_NAME, PRIVATE_DIR_MODE, dir_fd=parent_fd)
    try:
        fd = open_dir(Path(PRIVATE_DIR_NAME), dir_fd=parent_fd)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        _check_private(fd, where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _same_private_dir(parent_fd: int, private_fd: int) -> bool:
    """Whether the private folder's name still leads to the folder we hold open."""
    named = lstat_at(parent_fd, PRIVATE_DIR_NAME)
    held = os.fstat(private_fd)
    return named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _new_op() -> str:
    return f"op_{time.time_ns():x}_{secrets.token_hex(6)}"


def _write_manifest(private: Path, manifest: DeletionManifest) -> None:
    # Process death is the failure this protocol covers: no fsync (see the module doc).
    atomic_write(private / f"{manifest.op}{MANIFEST_SUFFIX}", encode_json(manifest),
                 durable=False)


def _drop(private_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=private_fd)


# -- deletion -----------------------------------------------------------------------


class _Operation:
    """One deletion in flight: the descriptors and names it acts through."""

    def __init__(self, path: Path, name: str, parent_fd: int, private_fd: int,
                 manifest: DeletionManifest, on_step: StepHook | None) -> None:
        self.path = path
        self.name = name
        self.parent_fd = parent_fd
        self.private_fd = private_fd
        self.private = path.parent / PRIVATE_DIR_NAME
        self.manifest = manifest
        self.pin = f"{manifest.op}{PIN_SUFFIX}"
        self.on_step = on_step

    def step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)

    def finish(self) -> None:
        _drop(self.private_fd, f"{self.manifest.op}{MANIFEST_SUFFIX}")

    def put_back(self, outcome: DeleteOutcome, reason: str) -> DeleteFileResult:
        """Restore the pin to the original name without overwriting anything there."""
        try:
            os.link(self.pin, self.name, src_dir_fd=self.private_fd,
                    dst_dir_fd=self.parent_fd, follow_symlinks=False)
        except OSError as exc:
            why = ("a newer file lives at the path" if isinstance(exc, FileExistsError)
                   else f"restoring failed ({os.strerror(exc.errno or 0)})")
            return self.retain(f"{reason}; {why}")
        self.step("restore-linked")
        _drop(self.private_fd, self.pin)
        self.finish()
        return DeleteFileResult(deleted=False, outcome=outcome, reason=reason)

    def retain(self, reason: str) -> DeleteFileResult:
        retained = msgspec.structs.replace(self.manifest, state="retained", reason=reason)
        # If this write fails the manifest stays an intent of ours: recovery
        # takes it up once this process is proven dead.
        with contextlib.suppress(OSError):
            _write_manifest(self.private, retained)
        return DeleteFileResult(deleted=False, outcome="retained",
                                recovery_location=str(self.private / self.pin), reason=reason)


def delete_file_if_unchanged(
    path: str | os.PathLike[str],
    expected: FileRevision,
    validate: Callable[[FileRevision], bool],
    *,
    owner_lock: str | os.PathLike[str] | None = None,
    on_step: StepHook | None = None,
) -> DeleteFileResult:
    """Delete ``path`` only if it still holds ``expected`` and ``validate`` agrees.

    ``validate(pinned)`` is called with the pinned file's revision while nobody
    can reach it through ``path``; it may record audits. It is required: a
    deletion nobody validated is not a custody deletion. ``owner_lock`` names a
    lock file this process holds for as long as it may act on the deletion; it
    is recorded so recovery can prove this process dead. ``on_step`` is called
    with each step's name (``intent-recorded``, ``pinned``, ``confirmed``,
    ``unlinked``, ``restore-linked``), for tests that interrupt the protocol.

    Raises :class:`UnsafePathError` when the path or its folder is a symlink or
    unsafe; every other problem is a :class:`DeleteFileResult` that keeps the bytes.
    """
    path = Path(path)
    name = safe_name(path)
    parent_fd = open_dir(path.parent)
    try:
        current = lstat_at(parent_fd, name)
        if current is None:
            return DeleteFileResult(deleted=False, outcome="kept-changed",
                                    reason="the path no longer exists")
        if stat.S_ISLNK(current.st_mode):
            raise UnsafePathError(f"{path}: is a symlink; custody never follows one")
        if not identity_matches(current, expected):
            return DeleteFileResult(deleted=False, outcome="kept-changed",
                                    reason="the path holds another revision")
        private_fd = open_private_dir(parent_fd, path.parent, create=True)
        assert private_fd is not None
        try:
            return _delete(path, name, parent_fd, private_fd, expected, validate,
                           owner_lock, on_step)
        finally:
            os.close(private_fd)
    finally:
        os.close(parent_fd)


def _delete(path: Path, name: str, parent_fd: int, private_fd: int, expected: FileRevision,
            validate: Callable[[FileRevision], bool], owner_lock: str | os.PathLike[str] | None,
            on_step: StepHook | None) -> DeleteFileResult:
    parent_st = os.fstat(parent_fd)
    manifest = DeletionManifest(
        op=_new_op(), state="intent", source_name=name, source_dir=str(path.parent),
        source_dir_dev=parent_st.st_dev, source_dir_ino=parent_st.st_ino, expected=expected,
        creator=current_owner(owner_lock), created_at=time.time(),
    )
    op = _Operation(path, name, parent_fd, private_fd, manifest, on_step)
    if not _same_private_dir(parent_fd, private_fd):
        raise UnsafePathError(f"{op.private}: private custody folder was replaced")
    _write_manifest(op.private, manifest)
    op.step("intent-recorded")
    try:
        os.rename(name, op.pin, src_dir_fd=parent_fd, dst_dir_fd=private_fd)
    except FileNotFoundError:
        op.finish()
        return DeleteFileResult(deleted=False, outcome="kept-changed",
                                reason="the path vanished before it was pinned")
    op.step("pinned")
    try:
        captured = capture_at(private_fd, op.pin, where=str(op.private / op.pin))
    except (UnsafePathError, UnstableRevisionError) as exc:
        return op.put_back("kept-changed", f"the pinned file is not a stable regular file: {exc}")
    if captured is None:
        return op.retain("the pin vanished from the private folder")
    pinned = captured[0]
    if not pinned.same_file(expected):
        return op.put_back("kept-changed", "a newer file had replaced the expected revision")
    try:
        agreed = validate(pinned)
    except Exception as exc:
        return op.put_back("restored", f"validate raised {type(exc).__name__}: {exc}")
    if not agreed:
        return op.put_back("kept-refused", "validate refused the deletion")
    # Any write to the pinned inode since it was digested moves its ctime, which
    # nothing can set back: its stat is enough to recheck it.
    again = lstat_at(private_fd, op.pin)
    if again is None or not identity_matches(again, pinned) \
            or not _same_private_dir(parent_fd, private_fd):
        return op.put_back("restored", "the pin changed before its private unlink")
    op.step("confirmed")
    try:
        os.unlink(op.pin, dir_fd=private_fd)
    except OSError as exc:
        return op.put_back("restored", f"private unlink failed ({os.strerror(exc.errno or 0)})")
    op.step("unlinked")
    op.finish()
    return DeleteFileResult(deleted=True, outcome="deleted")


# -- reading a private folder ----------------------------------------------------------


def _operations(private_fd: int) -> tuple[set[str], set[str]]:
    """The operation ids with a manifest, and those with a pin (hidden names skipped)."""
    manifests: set[str] = set()
    pins: set[str] = set()
    for entry in os.listdir(private_fd):
        if entry.startswith("."):
            continue  # the recovery lock, and atomic_write's temp files (never a pin's intent)
        if entry.endswith(MANIFEST_SUFFIX):
            manifests.add(entry[: -len(MANIFEST_SUFFIX)])
        elif entry.endswith(PIN_SUFFIX):
            pins.add(entry[: -len(PIN_SUFFIX)])
        else:
            pins.add(entry)  # an unknown file is evidence of an unknown operation
    return manifests, pins


def _read_manifest(private_fd: int, op: str, where: Path) -> DeletionManifest | None:
    try:
        captured = capture_at(private_fd, f"{op}{MANIFEST_SUFFIX}", where=str(where))
        if captured is None:
            return None
        manifest = msgspec.json.decode(captured[1], type=DeletionManifest)
    except (msgspec.DecodeError, UnsafePathError, UnstableRevisionError):
        return None
    if manifest.op != op or safe_name_or_none(manifest.source_name) is None:
        return None
    return manifest


def safe_name_or_none(name: str) -> str | None:
    try:
        return safe_name(Path(name))
    except UnsafePathError:
        return None


def pending_custody(directory: str | os.PathLike[str]) -> PendingCustody:
    """What the private folder beside ``directory``'s files holds, without acting on it."""
    directory = Path(directory)
    try:
        dir_fd = open_dir(directory)
    except FileNotFoundError:
        return PendingCustody()
    except UnsafePathError:
        return PendingCustody(unknown=True)
    try:
        try:
            private_fd = open_private_dir(dir_fd, directory, create=False)
        except UnsafePathError:
            return PendingCustody(unknown=True)
        if private_fd is None:
            return PendingCustody()
        try:
            return _pending(private_fd, directory, os.fstat(dir_fd))
        finally:
            os.close(private_fd)
    finally:
        os.close(dir_fd)


def _pending(private_fd: int, directory: Path, dir_st: os.stat_result) -> PendingCustody:
    manifests, pins = _operations(private_fd)
    sources: set[str] = set()
    unknown = bool(pins - manifests)
    retained = malformed = 0
    for op in manifests:
        manifest = _read_manifest(private_fd, op, directory / PRIVATE_DIR_NAME / op)
        if manifest is None:
            malformed += 1
            unknown = True
            continue
        if (manifest.source_dir_dev, manifest.source_dir_ino) != (dir_st.st_dev, dir_st.st_ino):
            unknown = True
            continue
        sources.add(manifest.source_name)
        retained += manifest.state == "retained"
    return PendingCustody(sources=frozenset(sources), unknown=unknown, manifests=len(manifests),
                          pins=len(pins), retained=retained, malformed=malformed)


# -- recovery -----------------------------------------------------------------------


def recover_interrupted_file_deletions(
    directory: str | os.PathLike[str],
    validate: Callable[[str], bool],
) -> list[FileRecoveryResult]:
    """Finish or undo the interrupted deletions of files in ``directory``.

    ``directory`` is the folder holding the live files; its private custody
    folder is found beside them. ``validate(source_path)`` says whether an
    interrupted deletion may complete; when it says no, the pinned bytes are
    linked back to the source path unless something newer lives there (then
    they are retained). An operation is acted on only when its manifest was
    created on this host, platform and PID namespace and its creator is proven
    dead, or when the creator marked it ``retained``. Results name the source
    path whenever the manifest does.
    """
    directory = Path(directory)
    try:
        dir_fd = open_dir(directory)
    except FileNotFoundError:
        return []
    try:
        try:
            private_fd = open_private_dir(dir_fd, directory, create=False)
        except UnsafePathError as exc:
            return [FileRecoveryResult(source_path=None, outcome="kept-unknown", reason=str(exc))]
        if private_fd is None:
            return []
        try:
            return _recover_folder(directory, dir_fd, private_fd, validate)
        finally:
            os.close(private_fd)
    finally:
        os.close(dir_fd)


def _recover_folder(directory: Path, dir_fd: int, private_fd: int,
                    validate: Callable[[str], bool]) -> list[FileRecoveryResult]:
    private = directory / PRIVATE_DIR_NAME
    try:
        lock_fd = lock_exclusive(private / RECOVERY_LOCK_NAME)
    except CustodyRefused as exc:
        return [FileRecoveryResult(source_path=None, outcome="kept-busy", reason=str(exc))]
    try:
        manifests, pins = _operations(private_fd)
        recovery = _Recovery(directory, dir_fd, private_fd, validate)
        results = [
            FileRecoveryResult(source_path=None, outcome="kept-unknown",
                               recovery_location=str(private / name),
                               reason="a pinned file without a manifest: its source is unknown")
            for name in sorted(pins - manifests)
        ]
        results += [recovery.recover(op) for op in sorted(manifests)]
        return results
    finally:
        os.close(lock_fd)


class _Recovery:
    def __init__(self, directory: Path, dir_fd: int, private_fd: int,
                 validate: Callable[[str], bool]) -> None:
        self.directory = directory
        self.dir_fd = dir_fd
        self.private_fd = private_fd
        self.private = directory / PRIVATE_DIR_NAME
        self.validate = validate
        dir_st = os.fstat(dir_fd)
        self.dir_identity = (dir_st.st_dev, dir_st.st_ino)

    def recover(self, op: str) -> FileRecoveryResult:
        pin = f"{op}{PIN_SUFFIX}"
        pin_location = str(self.private / pin) if lstat_at(self.private_fd, pin) else None
        manifest = _read_manifest(self.private_fd, op, self.private / f"{op}{MANIFEST_SUFFIX}")
        if manifest is None:
            return FileRecoveryResult(
                source_path=None, outcome="kept-malformed",
                recovery_location=pin_location or str(self.private / f"{op}{MANIFEST_SUFFIX}"),
                reason="the manifest cannot be read: its source is unknown")
        if (manifest.source_dir_dev, manifest.source_dir_ino) != self.dir_identity:
            return FileRecoveryResult(
                source_path=None, outcome="kept-unknown", recovery_location=pin_location,
                reason="the manifest was written for another folder")
        source = str(self.directory / manifest.source_name)

        def kept(outcome: RecoveryOutcome, reason: str) -> FileRecoveryResult:
            return FileRecoveryResult(source_path=source, outcome=outcome,
                                      recovery_location=pin_location, reason=reason)

        liveness = owner_liveness(manifest.creator)
        if liveness is Liveness.FOREIGN:
            return kept("kept-foreign", "created on another host, platform or PID namespace")
        if manifest.state != "retained":
            if liveness is Liveness.ALIVE:
                return kept("kept-live", "its creator is alive")
            if liveness is Liveness.UNKNOWN:
                return kept("kept-unknown-owner", "its creator's death cannot be proven")
        return self._act(op, manifest, source, kept)

    def _act(self, op: str, manifest: DeletionManifest, source: str,
             kept: Callable[[RecoveryOutcome, str], FileRecoveryResult]) -> FileRecoveryResult:
        pin = f"{op}{PIN_SUFFIX}"
        pin_st = lstat_at(self.private_fd, pin)
        if pin_st is None:
            self._finish(op)
            return FileRecoveryResult(source_path=source, outcome="cleared",
                                      reason="nothing was pinned, or the deletion had completed")
        source_st = lstat_at(self.dir_fd, manifest.source_name)
        if source_st is not None and (source_st.st_dev, source_st.st_ino) == (
            pin_st.st_dev, pin_st.st_ino
        ):
            return self._unpin(op, source, "restored", "the restoring link had been made")
        try:
            captured = capture_at(self.private_fd, pin, where=str(self.private / pin))
        except (UnsafePathError, UnstableRevisionError) as exc:
            return kept("kept-error", str(exc))
        if captured is None:
            return kept("kept-error", "the pin vanished while recovering")
        if not captured[0].same_file(manifest.expected):
            return self._restore(op, manifest, source,
                                 "the pinned file is not the expected revision")
        try:
            may_complete = self.validate(source)
        except Exception as exc:
            return kept("kept-error", f"validate raised {type(exc).__name__}: {exc}")
        if may_complete:
            return self._unpin(op, source, "deleted", "validate allowed the deletion to complete")
        return self._restore(op, manifest, source, "validate refused the deletion")

    def _unpin(self, op: str, source: str, outcome: RecoveryOutcome,
               reason: str) -> FileRecoveryResult:
        if not _same_private_dir(self.dir_fd, self.private_fd):
            return FileRecoveryResult(source_path=source, outcome="kept-error",
                                      reason="the private folder was replaced")
        _drop(self.private_fd, f"{op}{PIN_SUFFIX}")
        self._finish(op)
        return FileRecoveryResult(source_path=source, outcome=outcome, reason=reason)

    def _restore(self, op: str, manifest: DeletionManifest, source: str,
                 reason: str) -> FileRecoveryResult:
        pin = f"{op}{PIN_SUFFIX}"
        try:
            os.link(pin, manifest.source_name, src_dir_fd=self.private_fd,
                    dst_dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError as exc:
            why = ("a newer file lives at the source path" if isinstance(exc, FileExistsError)
                   else f"restoring failed ({os.strerror(exc.errno or 0)})")
            if manifest.state != "retained":
                with contextlib.suppress(OSError):
                    _write_manifest(self.private, msgspec.structs.replace(
                        manifest, state="retained", reason=f"{reason}; {why}"))
            return FileRecoveryResult(source_path=source, outcome="retained",
                                      recovery_location=str(self.private / pin),
                                      reason=f"{reason}; {why}")
        return self._unpin(op, source, "restored", reason)

    def _finish(self, op: str) -> None:
        _drop(self.private_fd, f"{op}{MANIFEST_SUFFIX}")
