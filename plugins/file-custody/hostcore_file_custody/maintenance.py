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

from hostcore_file_custody.anchor import RegistryAnchor
from hostcore_file_custody.errors import CustodyError
from hostcore_file_custody.fsio import TEMP_SUFFIX
from hostcore_file_custody.private import open_private_dir

# Temp files and probes older than this are a killed writer's leftovers (seconds).
LEFTOVER_AGE_SECONDS = 3600.0
# The cache folders, whose private folders hold probes and temp manifests; their own
# leftovers are collected by the sweep's scan of them (it lists them anyway).
_CACHE_FOLDERS = ("heartbeats", "pid-map", "prompt-hash")
# Small folders listed here whole.
_SMALL_FOLDERS = ("generations", "audit")

# A folder's entries met by a scan, with the descriptor of the folder they are in.
Entries = list[tuple[int, os.DirEntry[str]]]


def is_leftover(name: str) -> bool:
    return name.startswith(".") and (name.endswith(TEMP_SUFFIX) or name.startswith(".probe-"))


def prune_entries(entries: Entries, *, max_age: float = LEFTOVER_AGE_SECONDS,
                  now: float | None = None) -> int:
    """Remove those of ``entries`` that are leftovers older than ``max_age``; how many.

    Each is unlinked relative to the descriptor it was listed through, never by a
    path that could lead elsewhere by now.
    """
    now = time.time() if now is None else now
    pruned = 0
    for dir_fd, entry in entries:
        if not is_leftover(entry.name):
            continue
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age:
                os.unlink(entry.name, dir_fd=dir_fd)
                pruned += 1
    return pruned


def prune_leftovers(anchor: RegistryAnchor, *, max_age: float = LEFTOVER_AGE_SECONDS,
                    now: float | None = None) -> int:
    """Remove temp files and probes older than ``max_age`` seconds from the registry's
    small folders and private folders; returns how many. Missing or unreadable
    folders are skipped: nothing here may stop a pass."""
    pruned = 0
    opened: list[int] = []
    try:
        folders = [fd for name in _SMALL_FOLDERS if (fd := anchor.folder(name)) is not None]
        for name in _CACHE_FOLDERS:
            folder_fd = anchor.folder(name)
            if folder_fd is None:
                continue
            with contextlib.suppress(CustodyError, OSError):
                private_fd = open_private_dir(folder_fd, anchor.root / name, create=False)
                if private_fd is not None:
                    opened.append(private_fd)
        for dir_fd in [*folders, *opened]:
            try:
                with os.scandir(dir_fd) as listing:
                    entries = [(dir_fd, entry) for entry in listing]
            except OSError:
                continue
            pruned += prune_entries(entries, max_age=max_age, now=now)
    finally:
        for private_fd in opened:
            os.close(private_fd)
    return pruned
