"""Release an operation recovery will not act on, by hand, keeping its evidence.

Recovery keeps what it cannot prove safe: a manifest from another host or PID
namespace (a container since removed), one written for another folder (a
registry restored by ``cp -a``), a torn manifest, a pin without a manifest, an
owner whose death cannot be proven. Each keeps protecting its source, or its
whole folder, until a person decides. :func:`release_custody` is that decision
(``hostcore custody recover --release PATH``):

* it refuses while the operation's creator is provably alive (an intent whose
  owner lives is a deletion in progress), and while a recovery runs;
* it puts a pinned file back at its source path when that is free (never over
  a newer file), since those bytes came from there;
* it moves everything else of the operation (manifest, a pin that could not go
  back) into ``<folder>/.custody-released/``, beside a note of what was done,
  so no byte is destroyed and nothing protects the folder any more.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

import msgspec

from hostcore_file_custody.errors import CustodyError, CustodyRefused, os_reason
from hostcore_file_custody.fsio import move_noreplace, publish_at, put_back, put_back_method
from hostcore_file_custody.locks import lock_exclusive
from hostcore_file_custody.owner import Liveness, OwnerRecord, current_owner, owner_liveness
from hostcore_file_custody.private import (
    MANIFEST_SUFFIX,
    PIN_SUFFIX,
    RECOVERY_LOCK_NAME,
    RELEASED_DIR_NAME,
    DeletionManifest,
    open_private_dir,
    operations,
    read_manifest,
)
from hostcore_file_custody.revision import PRIVATE_DIR_NAME, lstat_at, open_dir
from hostcore_file_custody.support import require_custody

ReleaseOutcome = Literal["released", "released-restored", "refused-live", "refused-busy",
                         "not-found", "kept-error"]


class ReleaseResult(msgspec.Struct, frozen=True, kw_only=True):
    """What releasing one operation did.

    ``outcome``: ``released-restored`` (the pinned file is back at its source;
    the manifest kept as evidence), ``released`` (everything moved to
    ``evidence_location``), ``refused-live`` (its creator is alive),
    ``refused-busy`` (a recovery runs), ``not-found``, ``kept-error``.
    """

    op: str | None
    outcome: ReleaseOutcome
    source_path: str | None = None
    evidence_location: str | None = None
    reason: str = ""


class ReleaseNote(msgspec.Struct, frozen=True, kw_only=True):
    """Written beside released evidence: what was released, when, by whom, and why."""

    op: str
    released_at: float
    released_by: OwnerRecord
    creator_liveness: str
    outcome: str
    source_name: str | None
    moved: list[str]


def release_custody(path: str | os.PathLike[str]) -> list[ReleaseResult]:
    """Release the custody operation(s) at ``path``, keeping their evidence.

    ``path`` is a manifest, a pin or any entry inside a ``.custody`` folder (the
    ``recovery_location`` recovery and status print), or a source path: then
    every operation naming that file is released.
    """
    require_custody()
    path = Path(os.path.abspath(path))
    if path.parent.name == PRIVATE_DIR_NAME:
        folder, wanted = path.parent.parent, _op_of(path.name)
        source_name = None
    else:
        folder, wanted, source_name = path.parent, None, path.name
    try:
        dir_fd = open_dir(folder)
    except (CustodyError, OSError) as exc:
        return [ReleaseResult(op=None, outcome="not-found", reason=str(exc))]
    try:
        try:
            private_fd = open_private_dir(dir_fd, folder, create=False)
        except (CustodyError, OSError) as exc:
            return [ReleaseResult(op=None, outcome="kept-error", reason=str(exc))]
        if private_fd is None:
            return [ReleaseResult(op=None, outcome="not-found",
                                  reason=f"{folder}: no custody folder")]
        try:
            return _release_in(folder, dir_fd, private_fd, wanted, source_name)
        finally:
            os.close(private_fd)
    finally:
        os.close(dir_fd)


def _op_of(name: str) -> str:
    for suffix in (MANIFEST_SUFFIX, PIN_SUFFIX):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _release_in(folder: Path, dir_fd: int, private_fd: int, wanted: str | None,
                source_name: str | None) -> list[ReleaseResult]:
    private = folder / PRIVATE_DIR_NAME
    try:
        lock = lock_exclusive(private / RECOVERY_LOCK_NAME, role="recovery")
    except CustodyRefused as exc:
        return [ReleaseResult(op=wanted, outcome="refused-busy", reason=str(exc))]
    try:
        manifests, pins = operations(private_fd)
        ops = sorted(manifests | pins)
        if wanted is not None:
            ops = [op for op in ops if op == wanted]
        else:
            ops = [op for op in sorted(manifests)
                   if (m := read_manifest(private_fd, op, private / op)) is not None
                   and m.source_name == source_name]
        if not ops:
            return [ReleaseResult(op=wanted, outcome="not-found",
                                  reason="no custody operation matches that path")]
        return [_Release(folder, dir_fd, private_fd).release(op, op in pins) for op in ops]
    finally:
        lock.close()


class _Release:
    def __init__(self, folder: Path, dir_fd: int, private_fd: int) -> None:
        self.folder = folder
        self.dir_fd = dir_fd
        self.private_fd = private_fd
        self.private = folder / PRIVATE_DIR_NAME
        self.evidence = folder / RELEASED_DIR_NAME

    def release(self, op: str, pinned: bool) -> ReleaseResult:
        manifest = read_manifest(self.private_fd, op, self.private / f"{op}{MANIFEST_SUFFIX}")
        liveness = owner_liveness(manifest.creator) if manifest else None
        source = str(self.folder / manifest.source_name) if manifest else None
        if manifest is not None and manifest.state == "intent" and liveness is Liveness.ALIVE:
            return ReleaseResult(op=op, outcome="refused-live", source_path=source,
                                 reason="its creator is alive: the deletion is in progress")
        try:
            evidence_fd = open_private_dir(self.dir_fd, self.folder, create=True,
                                           name=RELEASED_DIR_NAME)
        except (CustodyError, OSError) as exc:
            return ReleaseResult(op=op, outcome="kept-error", source_path=source,
                                 reason=f"the evidence folder cannot be made: {exc}")
        assert evidence_fd is not None
        try:
            return self._move(op, pinned, manifest, liveness, source, evidence_fd)
        except OSError as exc:
            return ReleaseResult(op=op, outcome="kept-error", source_path=source,
                                 reason=f"the system refused: {os_reason(exc)}")
        finally:
            os.close(evidence_fd)

    def _move(self, op: str, pinned: bool, manifest: DeletionManifest | None,
              liveness: Liveness | None, source: str | None,
              evidence_fd: int) -> ReleaseResult:
        pin = f"{op}{PIN_SUFFIX}" if lstat_at(self.private_fd, f"{op}{PIN_SUFFIX}") else op
        restored = False
        if pinned and manifest is not None and lstat_at(self.dir_fd, manifest.source_name) is None:
            method = put_back_method(self.private_fd)
            if method is not None:
                try:
                    if put_back(method, self.private_fd, pin, self.dir_fd,
                                manifest.source_name):
                        os.unlink(pin, dir_fd=self.private_fd)
                    restored = True
                except FileExistsError:
                    pass  # something newer arrived: the pin goes to the evidence instead
        moved = []
        leftovers = [f"{op}{MANIFEST_SUFFIX}"] + ([] if restored or not pinned else [pin])
        for name in leftovers:
            if lstat_at(self.private_fd, name) is None:
                continue
            move_noreplace(self.private_fd, name, evidence_fd, name)
            moved.append(name)
        outcome: ReleaseOutcome = "released-restored" if restored else "released"
        note = ReleaseNote(op=op, released_at=time.time(), released_by=current_owner(),
                           creator_liveness=liveness.value if liveness else "unreadable",
                           outcome=outcome, source_name=manifest.source_name if manifest else None,
                           moved=moved)
        publish_at(evidence_fd, f"{op}.release{MANIFEST_SUFFIX}", msgspec.json.encode(note),
                   durable=True)
        return ReleaseResult(op=op, outcome=outcome, source_path=source,
                             evidence_location=str(self.evidence),
                             reason="the pinned file is back at its source" if restored
                             else "moved to the evidence folder")
