"""Pruning by age what no protocol step will ever finish: temp files of killed writers.

A writer killed between creating its temp file (``.<name>.<token>.tmp``, see
:mod:`.fsio`) and renaming it leaves the temp file behind forever; so does a
put-back probe (``.probe-*``). Neither was ever published, so no reader or
recovery depends on it, and a writer still alive after :data:`LEFTOVER_AGE_SECONDS`
only finds its rename failing. Age is safe here because these files carry no
evidence; it is never used to decide anything about pins, manifests or owners.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hostcore_file_custody.fsio import TEMP_SUFFIX
from hostcore_file_custody.revision import PRIVATE_DIR_NAME

if TYPE_CHECKING:
    from hostcore_file_custody.registry import HeartbeatRegistry

# Temp files and probes older than this are a killed writer's leftovers (seconds).
LEFTOVER_AGE_SECONDS = 3600.0


def is_leftover(name: str) -> bool:
    return name.startswith(".") and (name.endswith(TEMP_SUFFIX) or name.startswith(".probe-"))


def registry_folders(registry: HeartbeatRegistry) -> list[Path]:
    """The small folders of ``registry`` where a writer of ours may leave a temp file.

    The three cache folders are not listed: they hold one file per session, so the
    sweep collects their leftovers from the scan it makes anyway (:func:`prune_entries`).
    """
    private = [folder / PRIVATE_DIR_NAME for folder in registry.cache_dirs.values()]
    return [*private, registry.generations_dir, registry.audit_dir]


def prune_entries(entries: list[os.DirEntry[str]], *, max_age: float = LEFTOVER_AGE_SECONDS,
                  now: float | None = None) -> int:
    """Remove those of ``entries`` that are leftovers older than ``max_age``; how many."""
    now = time.time() if now is None else now
    pruned = 0
    for entry in entries:
        if not is_leftover(entry.name):
            continue
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age:
                os.unlink(entry.path)
                pruned += 1
    return pruned


def prune_leftovers(registry: HeartbeatRegistry, *, max_age: float = LEFTOVER_AGE_SECONDS,
                    now: float | None = None) -> int:
    """Remove temp files and probes older than ``max_age`` seconds from the registry's
    small folders; returns how many. Missing or unreadable folders are skipped: nothing
    here may stop a pass."""
    pruned = 0
    for folder in registry_folders(registry):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        pruned += prune_entries(entries, max_age=max_age, now=now)
    return pruned
