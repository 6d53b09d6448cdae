"""Delete exactly the bytes that were observed, never the path a writer may republish.

:func:`delete_file_if_unchanged` never unlinks the original path. It records an
intent manifest in the private folder beside the file (see
:mod:`.private`), moves the live name into that folder with one atomic rename
(the *pin*), and only then decides, looking at the pinned inode rather than at
a path a writer may have republished:

1. the pinned file must be the expected revision, else it is put back;
2. ``validate(pinned)`` must agree, else it is put back;
3. the pin is checked again just before the private unlink.

Putting back never overwrites a newer file published at the path meanwhile: it
is ``renameat2(RENAME_NOREPLACE)`` where the filesystem has it, else a hard
link; which one is probed before the first pin of each filesystem, and a folder
where neither works is refused custody (``kept-unsupported``) rather than risk
leaving its live path empty. When putting back collides or fails, the pinned
bytes stay in the private folder (``retained``) with their manifest, and the
result names that recovery location.

Every operating-system error ends in a result: before anything moved it is
``kept-error`` with nothing left behind; after the pin the file is put back.
Interrupted deletions are finished or undone by :mod:`.recovery`.

A caller may hand the last step (the private unlink, once the pin is confirmed) to
another thread (``defer_unlink``, see :mod:`.unlinker`): it is the step that waits
longest in the kernel. It runs there as it would here, except that a failed unlink
retains the pin for recovery instead of putting it back: by then the caller's custody
of the live path may be over.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from hostcore_file_custody.errors import (
    FileAccessError,
    UnsafePathError,
    UnstableRevisionError,
    os_reason,
)
from hostcore_file_custody.fsio import PutBack, put_back, put_back_method
from hostcore_file_custody.owner import current_owner
from hostcore_file_custody.private import (
    MANIFEST_SUFFIX,
    PIN_SUFFIX,
    DeletionManifest,
    ManifestSpares,
    drop,
    new_op,
    open_private_dir,
    same_private_dir,
    write_manifest,
)
from hostcore_file_custody.revision import (
    PRIVATE_DIR_NAME,
    FileRevision,
    capture_at,
    identity_matches,
    lstat_at,
    open_dir,
    safe_name,
)
from hostcore_file_custody.support import require_custody

DeleteOutcome = Literal["deleted", "kept-changed", "kept-refused", "kept-error",
                        "kept-unsupported", "restored", "retained", "unlinking"]

StepHook = Callable[[str], None]
# Takes the deferred last step of a deletion; runs it and delivers its result.
DeferUnlink = Callable[[Callable[[], "DeleteFileResult"]], None]


class DeleteFileResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`delete_file_if_unchanged` did.

    ``outcome``: ``deleted``; ``kept-changed`` (the path did not hold the expected
    revision; anything pinned was put back); ``kept-refused`` (``validate`` said
    no; put back); ``kept-error`` (an OS error, such as permission denied or no
    space, stopped it before anything moved; nothing is left behind);
    ``kept-unsupported`` (this filesystem cannot put a file back without
    overwriting: custody refused, nothing moved); ``restored`` (an error stopped
    the deletion after the pin; put back); ``retained`` (putting back was
    impossible: the pinned bytes stay at ``recovery_location``); ``unlinking`` (the
    pin is confirmed and its private unlink was handed to ``defer_unlink``, which
    delivers the final result). ``reason`` says why.
    """

    deleted: bool
    outcome: DeleteOutcome
    recovery_location: str | None = None
    reason: str = ""


def _kept(outcome: DeleteOutcome, reason: str) -> DeleteFileResult:
    return DeleteFileResult(deleted=False, outcome=outcome, reason=reason)


class _Operation:
    """One deletion in flight: the descriptors and names it acts through."""

    def __init__(self, path: Path, name: str, parent_fd: int, private_fd: int,
                 manifest: DeletionManifest, method: PutBack,
                 on_step: StepHook | None, spares: ManifestSpares | None = None) -> None:
        self.path = path
        self.name = name
        self.parent_fd = parent_fd
        self.private_fd = private_fd
        self.private = path.parent / PRIVATE_DIR_NAME
        self.manifest = manifest
        self.method = method
        self.pin = f"{manifest.op}{PIN_SUFFIX}"
        self.on_step = on_step
        self.spares = spares

    def step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)

    def detach(self) -> None:
        """Hold the private folder open ourselves: the caller closes its descriptors
        once we return. (A detached step never puts back: it needs no other.)"""
        self.private_fd = os.dup(self.private_fd)

    def close(self) -> None:
        os.close(self.private_fd)

    def unlink_pin(self, *, deferred: bool = False) -> DeleteFileResult:
        """The private unlink of the confirmed pin, then its manifest.

        When it fails the file is put back, unless the step was ``deferred``: the
        caller's custody may be over by then, so the live path is not touched and the
        pin is retained instead, for the next recovery to put back (or finish).
        """
        try:
            os.unlink(self.pin, dir_fd=self.private_fd)
        except OSError as exc:
            reason = f"private unlink failed: {os_reason(exc)}"
            return self.retain(reason) if deferred else self.put_back("restored", reason)
        self.step("unlinked")
        self.finish()
        return DeleteFileResult(deleted=True, outcome="deleted")

    def unlink_pin_detached(self) -> DeleteFileResult:
        try:
            return self.unlink_pin(deferred=True)
        finally:
            self.close()

    def finish(self) -> None:
        # If the manifest cannot be dropped it stays an intent of ours with
        # nothing pinned: recovery clears it once this process is proven dead.
        name = f"{self.manifest.op}{MANIFEST_SUFFIX}"
        with contextlib.suppress(OSError):
            if self.spares is None:
                drop(self.private_fd, name)
            else:
                self.spares.drop(self.private_fd, name)

    def put_back(self, outcome: DeleteOutcome, reason: str) -> DeleteFileResult:
        """Restore the pin to the original name without overwriting anything there."""
        try:
            linked = put_back(self.method, self.private_fd, self.pin, self.parent_fd,
                              self.name)
        except OSError as exc:
            why = ("a newer file lives at the path" if isinstance(exc, FileExistsError)
                   else f"restoring failed: {os_reason(exc)}")
            return self.retain(f"{reason}; {why}")
        self.step("restore-linked")
        if linked:
            with contextlib.suppress(OSError):
                drop(self.private_fd, self.pin)
        self.finish()
        return _kept(outcome, reason)

    def retain(self, reason: str) -> DeleteFileResult:
        retained = msgspec.structs.replace(self.manifest, state="retained", reason=reason)
        # If this write fails the manifest stays an intent of ours: recovery
        # takes it up once this process is proven dead.
        with contextlib.suppress(OSError):
            write_manifest(self.private_fd, retained, self.spares)
        return DeleteFileResult(deleted=False, outcome="retained",
                                recovery_location=str(self.private / self.pin), reason=reason)


def delete_file_if_unchanged(
    path: str | os.PathLike[str],
    expected: FileRevision,
    validate: Callable[[FileRevision], bool],
    *,
    owner_lock: str | os.PathLike[str] | None = None,
    on_step: StepHook | None = None,
    dir_fd: int | None = None,
    defer_unlink: DeferUnlink | None = None,
    spares: ManifestSpares | None = None,
) -> DeleteFileResult:
    """Delete ``path`` only if it still holds ``expected`` and ``validate`` agrees.

    ``validate(pinned)`` is called with the pinned file's revision while nobody
    can reach it through ``path``; it may record audits. It is required: a
    deletion nobody validated is not a custody deletion. ``owner_lock`` names a
    lock file this process holds for as long as it may act on the deletion; it
    is recorded so recovery can prove this process dead. ``on_step`` is called
    with each step's name (``intent-recorded``, ``pinned``, ``confirmed``,
    ``unlinked``, ``restore-linked``), for tests that interrupt the protocol.
    ``dir_fd``, when given, is ``path``'s folder already open (a sweep's verified
    descriptor): the deletion acts there whatever the path names by then.
    ``defer_unlink``, when given, is handed the last step once the pin is confirmed
    (a callable returning the final result: ``deleted``, or ``retained`` when the
    unlink fails: a deferred step never touches the live path, which the caller may
    no longer hold); it must run it (in any thread) and deliver its result, and this
    call returns ``unlinking``. A deferred step calls ``on_step("unlinked")`` from
    where it runs. ``spares``, when given, keeps dropped manifests' files to write
    the next manifests in (:class:`~.private.ManifestSpares`: one per sweep).

    Raises :class:`UnsafePathError` when the path or its folder is a symlink or
    unsafe; every other problem, OS errors included, is a :class:`DeleteFileResult`
    that keeps the bytes.
    """
    require_custody()
    path = Path(path)
    name = safe_name(path)
    try:
        parent_fd = open_dir(path.parent) if dir_fd is None else os.dup(dir_fd)
    except FileNotFoundError:
        return _kept("kept-changed", "the folder no longer exists")
    except OSError as exc:
        return _kept("kept-error", f"the folder cannot be opened: {os_reason(exc)}")
    try:
        try:
            current = lstat_at(parent_fd, name)
        except OSError as exc:
            return _kept("kept-error", f"the path cannot be examined: {os_reason(exc)}")
        if current is None:
            return _kept("kept-changed", "the path no longer exists")
        if stat.S_ISLNK(current.st_mode):
            raise UnsafePathError(f"{path}: is a symlink; custody never follows one")
        if not identity_matches(current, expected):
            return _kept("kept-changed", "the path holds another revision")
        try:
            private_fd = open_private_dir(parent_fd, path.parent, create=True)
        except OSError as exc:
            return _kept("kept-error", f"the private folder cannot be made: {os_reason(exc)}")
        assert private_fd is not None
        try:
            method = _put_back_for(private_fd, current)
            if isinstance(method, DeleteFileResult):
                return method  # custody refused before anything moved
            return _delete(path, name, parent_fd, private_fd, expected, validate,
                           owner_lock, method, on_step, defer_unlink, spares)
        finally:
            os.close(private_fd)
    finally:
        os.close(parent_fd)


def _put_back_for(private_fd: int, current: os.stat_result) -> PutBack | DeleteFileResult:
    """How this file could be put back, decided before anything moves; or why it cannot."""
    try:
        method = put_back_method(private_fd)
    except OSError as exc:
        return _kept("kept-error", f"put-back support cannot be probed: {os_reason(exc)}")
    if method is None:
        return _kept("kept-unsupported", "this filesystem can put nothing back without "
                     "overwriting (no RENAME_NOREPLACE, no hard links): custody refused")
    if method == "link" and current.st_uid != os.geteuid() and os.geteuid() != 0:
        # Protected hard links refuse to link another user's file: it could not go back.
        return _kept("kept-unsupported", "another user's file cannot be linked back on this "
                     "filesystem: custody refused")
    return method


def _delete(path: Path, name: str, parent_fd: int, private_fd: int, expected: FileRevision,
            validate: Callable[[FileRevision], bool], owner_lock: str | os.PathLike[str] | None,
            method: PutBack, on_step: StepHook | None,
            defer_unlink: DeferUnlink | None,
            spares: ManifestSpares | None = None) -> DeleteFileResult:
    parent_st = os.fstat(parent_fd)
    manifest = DeletionManifest(
        op=new_op(), state="intent", source_name=name, source_dir=str(path.parent),
        source_dir_dev=parent_st.st_dev, source_dir_ino=parent_st.st_ino, expected=expected,
        creator=current_owner(owner_lock), created_at=time.time(),
    )
    op = _Operation(path, name, parent_fd, private_fd, manifest, method, on_step, spares)
    if not same_private_dir(parent_fd, private_fd):
        raise UnsafePathError(f"{op.private}: private custody folder was replaced")
    try:
        write_manifest(private_fd, manifest, spares)
    except OSError as exc:
        return _kept("kept-error", f"the intent cannot be recorded: {os_reason(exc)}")
    op.step("intent-recorded")
    try:
        os.rename(name, op.pin, src_dir_fd=parent_fd, dst_dir_fd=private_fd)
    except FileNotFoundError:
        op.finish()
        return _kept("kept-changed", "the path vanished before it was pinned")
    except OSError as exc:
        op.finish()
        return _kept("kept-error", f"the file cannot be pinned: {os_reason(exc)}")
    op.step("pinned")
    return _judge_pin(op, expected, validate, defer_unlink)


def _judge_pin(op: _Operation, expected: FileRevision,
               validate: Callable[[FileRevision], bool],
               defer_unlink: DeferUnlink | None) -> DeleteFileResult:
    try:
        captured = capture_at(op.private_fd, op.pin, where=str(op.private / op.pin), keep=False)
    except (UnsafePathError, UnstableRevisionError) as exc:
        return op.put_back("kept-changed", f"the pinned file is not a stable regular file: {exc}")
    except FileAccessError as exc:
        return op.put_back("restored", f"the pinned file cannot be read: {exc}")
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
    try:
        again = lstat_at(op.private_fd, op.pin)
        same_folder = same_private_dir(op.parent_fd, op.private_fd)
    except OSError as exc:
        return op.put_back("restored", f"the pin cannot be rechecked: {os_reason(exc)}")
    if again is None or not identity_matches(again, pinned) or not same_folder:
        return op.put_back("restored", "the pin changed before its private unlink")
    op.step("confirmed")
    if defer_unlink is None:
        return op.unlink_pin()
    try:
        op.detach()
    except OSError:
        return op.unlink_pin()  # out of descriptors: finish it here instead
    defer_unlink(op.unlink_pin_detached)
    return DeleteFileResult(deleted=False, outcome="unlinking")

