"""Finish or undo deletions whose process died part-way (see :mod:`.deletion`).

:func:`recover_interrupted_file_deletions` acts only on manifests created on
this host, platform and PID namespace whose creator is proven dead (or that
their creator marked ``retained``); anything foreign, alive, unknown or
malformed is kept, and reported with its age so a person can judge it and, if
need be, release it (:mod:`.release`). Pinned files that are not regular files
(a folder swapped in at the pin moment) go back by the same no-clobber put-back.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from hostcore_file_custody.errors import CustodyError, CustodyRefused, UnsafePathError, os_reason
from hostcore_file_custody.fsio import PutBack, put_back, put_back_method
from hostcore_file_custody.locks import lock_exclusive
from hostcore_file_custody.owner import Liveness, owner_liveness
from hostcore_file_custody.private import (
    MANIFEST_SUFFIX,
    PIN_SUFFIX,
    RECOVERY_LOCK_NAME,
    DeletionManifest,
    drop,
    file_age,
    load_manifest,
    open_private_dir,
    operations,
    same_private_dir,
    write_manifest,
)
from hostcore_file_custody.revision import PRIVATE_DIR_NAME, capture_at, lstat_at, open_dir
from hostcore_file_custody.support import require_custody

RecoveryOutcome = Literal[
    "deleted",  # the interrupted deletion was completed (validate agreed)
    "restored",  # the pinned bytes are back at the source path
    "cleared",  # nothing was pinned (or the pin was already gone): the manifest was dropped
    "retained",  # restoring collided with a newer file or failed: pinned bytes kept
    "kept-foreign",  # created on another host, platform or PID namespace
    "kept-live",  # its creator is alive
    "kept-unknown-owner",  # its creator's liveness cannot be proven
    "kept-malformed",  # the manifest cannot be read: identity unknown
    "kept-oversized",  # the manifest is over its size cap, refused unread: identity unknown
    "kept-unknown",  # a pin with no manifest, or a manifest for another directory
    "kept-busy",  # another recovery of this folder is running
    "kept-error",  # the pin could not be read, validate raised, or the system refused
]
# Outcomes after which nothing of the operation is left in the private folder.
RESOLVED_OUTCOMES: frozenset[str] = frozenset({"deleted", "restored", "cleared"})


class FileRecoveryResult(msgspec.Struct, frozen=True, kw_only=True):
    """What recovery did with one interrupted deletion.

    ``source_path`` is ``None`` when the operation's identity is unknown (a
    malformed manifest, a pin without a manifest): then the whole folder must be
    treated as protected. ``age_seconds`` is how old the operation is (from its
    manifest, else its file), for a person deciding whether to release it.
    """

    source_path: str | None
    outcome: RecoveryOutcome
    recovery_location: str | None = None
    reason: str = ""
    age_seconds: float | None = None

    @property
    def resolved(self) -> bool:
        return self.outcome in RESOLVED_OUTCOMES


def recover_interrupted_file_deletions(
    directory: str | os.PathLike[str],
    validate: Callable[[str], bool],
    *,
    dir_fd: int | None = None,
) -> list[FileRecoveryResult]:
    """Finish or undo the interrupted deletions of files in ``directory``.

    ``directory`` is the folder holding the live files; its private custody
    folder is found beside them. ``validate(source_path)`` says whether an
    interrupted deletion may complete; when it says no, the pinned bytes are
    put back at the source path unless something newer lives there (then
    they are retained). An operation is acted on only when its manifest was
    created on this host, platform and PID namespace and its creator is proven
    dead, or when the creator marked it ``retained``. Results name the source
    path whenever the manifest does; OS errors become ``kept-error`` results.
    ``dir_fd``, when given, is ``directory`` already open (a pass's verified
    descriptor): recovery acts there whatever the path names by then.
    """
    require_custody()
    directory = Path(directory)
    try:
        folder_fd = open_dir(directory) if dir_fd is None else os.dup(dir_fd)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [FileRecoveryResult(source_path=None, outcome="kept-error",
                                   reason=f"the folder cannot be opened: {os_reason(exc)}")]
    try:
        try:
            private_fd = open_private_dir(folder_fd, directory, create=False)
        except UnsafePathError as exc:
            return [FileRecoveryResult(source_path=None, outcome="kept-unknown", reason=str(exc))]
        except OSError as exc:
            return [FileRecoveryResult(source_path=None, outcome="kept-error",
                                       reason=f"the private folder cannot be opened: "
                                              f"{os_reason(exc)}")]
        if private_fd is None:
            return []
        try:
            return _recover_folder(directory, folder_fd, private_fd, validate)
        finally:
            os.close(private_fd)
    finally:
        os.close(folder_fd)


def _recover_folder(directory: Path, dir_fd: int, private_fd: int,
                    validate: Callable[[str], bool]) -> list[FileRecoveryResult]:
    private = directory / PRIVATE_DIR_NAME
    try:
        lock = lock_exclusive(private / RECOVERY_LOCK_NAME, role="recovery")
    except CustodyRefused as exc:
        return [FileRecoveryResult(source_path=None, outcome="kept-busy", reason=str(exc))]
    try:
        manifests, pins = operations(private_fd)
        recovery = _Recovery(directory, dir_fd, private_fd, validate)
        now = time.time()
        results = [
            FileRecoveryResult(source_path=None, outcome="kept-unknown",
                               recovery_location=str(private / name),
                               reason="a pinned file without a manifest: its source is unknown",
                               age_seconds=file_age(private_fd, name + PIN_SUFFIX, now)
                               or file_age(private_fd, name, now))
            for name in sorted(pins - manifests)
        ]
        results += [recovery.recover(op) for op in sorted(manifests)]
        return results
    finally:
        lock.close()


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
        self._method: PutBack | Literal["unprobed"] | None = "unprobed"

    def method(self) -> PutBack | None:
        if self._method == "unprobed":
            self._method = put_back_method(self.private_fd)
        return self._method

    def recover(self, op: str) -> FileRecoveryResult:
        try:
            return self._recover(op)
        except OSError as exc:
            return FileRecoveryResult(source_path=None, outcome="kept-error",
                                      recovery_location=str(self.private / f"{op}{PIN_SUFFIX}"),
                                      reason=f"the system refused: {os_reason(exc)}")

    def _recover(self, op: str) -> FileRecoveryResult:
        pin = f"{op}{PIN_SUFFIX}"
        pin_location = str(self.private / pin) if lstat_at(self.private_fd, pin) else None
        manifest_name = f"{op}{MANIFEST_SUFFIX}"
        manifest = load_manifest(self.private_fd, op, self.private / manifest_name)
        if not isinstance(manifest, DeletionManifest):
            return FileRecoveryResult(
                source_path=None,
                outcome="kept-oversized" if manifest.oversized else "kept-malformed",
                recovery_location=pin_location or str(self.private / manifest_name),
                reason=f"{manifest.reason}: its source is unknown",
                age_seconds=file_age(self.private_fd, manifest_name, time.time()))
        age = max(0.0, time.time() - manifest.created_at)
        if (manifest.source_dir_dev, manifest.source_dir_ino) != self.dir_identity:
            return FileRecoveryResult(
                source_path=str(self.directory / manifest.source_name), outcome="kept-unknown",
                recovery_location=pin_location or str(self.private / manifest_name),
                reason="the manifest was written for another folder (a copied or restored "
                       "registry?)", age_seconds=age)
        source = str(self.directory / manifest.source_name)

        def kept(outcome: RecoveryOutcome, reason: str) -> FileRecoveryResult:
            return FileRecoveryResult(source_path=source, outcome=outcome,
                                      recovery_location=pin_location, reason=reason,
                                      age_seconds=age)

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
            captured = capture_at(self.private_fd, pin, where=str(self.private / pin),
                                  keep=False)
        except UnsafePathError:
            # A folder or a special file was swapped in at the pin moment: it goes back.
            return self._restore(op, manifest, source, "the pinned entry is not a regular file")
        except CustodyError as exc:
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
        if not same_private_dir(self.dir_fd, self.private_fd):
            return FileRecoveryResult(source_path=source, outcome="kept-error",
                                      reason="the private folder was replaced")
        drop(self.private_fd, f"{op}{PIN_SUFFIX}")
        self._finish(op)
        return FileRecoveryResult(source_path=source, outcome=outcome, reason=reason)

    def _restore(self, op: str, manifest: DeletionManifest, source: str,
                 reason: str) -> FileRecoveryResult:
        pin = f"{op}{PIN_SUFFIX}"
        method = self.method()
        try:
            if method is None:
                raise OSError(0, "this filesystem can put nothing back without overwriting")
            linked = put_back(method, self.private_fd, pin, self.dir_fd, manifest.source_name)
        except OSError as exc:
            why = ("a newer file lives at the source path" if isinstance(exc, FileExistsError)
                   else f"restoring failed: {exc.strerror or os_reason(exc)}")
            if manifest.state != "retained":
                with contextlib.suppress(OSError):
                    write_manifest(self.private_fd, msgspec.structs.replace(
                        manifest, state="retained", reason=f"{reason}; {why}"))
            return FileRecoveryResult(source_path=source, outcome="retained",
                                      recovery_location=str(self.private / pin),
                                      reason=f"{reason}; {why}",
                                      age_seconds=max(0.0, time.time() - manifest.created_at))
        if not linked:  # moved back: nothing of it is left in the private folder
            self._finish(op)
            return FileRecoveryResult(source_path=source, outcome="restored", reason=reason)
        return self._unpin(op, source, "restored", reason)

    def _finish(self, op: str) -> None:
        drop(self.private_fd, f"{op}{MANIFEST_SUFFIX}")
