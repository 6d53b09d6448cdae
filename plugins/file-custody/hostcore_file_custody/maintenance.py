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

from hostcore_file_custody.fsio import TEMP_SUFFIX
from hostcore_file_custody.registry import HeartbeatRegistry
from hostcore_file_custody.revision import PRIVATE_DIR_NAME

# Temp files and probes older than this are a killed writer's leftovers (seconds).
LEFTOVER_AGE_SECONDS = 3600.0


def _is_leftover(name: str) -> bool:
    return name.startswith(".") and (name.endswith(TEMP_SUFFIX) or name.startswith(".probe-"))


def registry_folders(registry: HeartbeatRegistry) -> list[Path]:
    """Every folder of ``registry`` where a writer of ours may leave a temp file."""
    folders: list[Path] = []
    for folder in registry.cache_dirs.values():
        folders += [folder, folder / PRIVATE_DIR_NAME]
    return [*folders, registry.generations_dir, registry.audit_dir]


def prune_leftovers(registry: HeartbeatRegistry, *, max_age: float = LEFTOVER_AGE_SECONDS,
                    now: float | None = None) -> int:
    """Remove temp files and probes older than ``max_age`` seconds; returns how many.

    Folders that are missing or unreadable are skipped: nothing here may stop a pass.
    """
    now = time.time() if now is None else now
    pruned = 0
    for folder in registry_folders(registry):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not _is_leftover(entry.name):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age:
                    os.unlink(entry.path)
                    pruned += 1
    return pruned
