"""Finding the installed plugins: entry points of one group, with their distributions.

hostcore reads the ``.dist-info`` (and ``.egg-info``) folders on ``sys.path`` itself
instead of through ``importlib.metadata``: listing plugins is on every command's
path, and the metadata package's imports and its full parse of every
distribution's metadata (through the ``email`` package) cost more than the rest of
a cold start together (``benchmarks/startup.py``). Only what the loader needs is
read: each distribution's ``entry_points.txt``, and the header lines of its
metadata when it has an entry point in the group.

As ``importlib.metadata`` does, the first distribution of a name on ``sys.path``
wins. A ``sys.path`` entry that is not a folder (a zip archive) is read through
``importlib_metadata``, which knows how.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

_SUFFIXES = (".dist-info", ".egg-info")


class DistLabel(NamedTuple):
    """What the loader reads from a distribution's core metadata."""

    name: str
    version: str | None
    requires: tuple[str, ...]  # every Requires-Dist line, as written


class FoundEntryPoint(NamedTuple):
    """One entry point of the group: its name, ``module[:attr]`` value, distribution."""

    name: str
    value: str
    dist: DistLabel

    def load(self) -> Any:
        """Import the module (and look up the attribute) the value names."""
        module, _, attr = self.value.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attr.split("[")[0].strip().split(".")):
            obj = getattr(obj, part)
        return obj


def entry_points(group: str, path: Iterable[str] | None = None) -> list[FoundEntryPoint]:
    """Every entry point in ``group`` of the distributions on ``path`` (``sys.path``)."""
    found: list[FoundEntryPoint] = []
    seen: set[str] = set()
    # Plain strings, not Path objects: every distribution on sys.path is looked at
    # on every command's start, and pathlib's parsing cost more than the reads.
    for entry in sys.path if path is None else path:
        folder = entry or "."
        if not os.path.isdir(folder):
            found.extend(_from_archive(entry, group, seen))
            continue
        for dist_folder in _metadata_folders(folder):
            base = dist_folder[:-len(".dist-info")] if dist_folder.endswith(".dist-info") \
                else dist_folder[:-len(".egg-info")]
            key = _normalized(base.split("-", 1)[0])
            if key in seen:
                continue
            seen.add(key)
            info = os.path.join(folder, dist_folder)
            points = _group_lines(os.path.join(info, "entry_points.txt"), group)
            if points:
                label = read_label(Path(info))
                found.extend(FoundEntryPoint(name, value, label) for name, value in points)
    return found


def read_label(info: Path) -> DistLabel:
    """Name, version and requirements from a metadata folder's header lines."""
    for file in ("METADATA", "PKG-INFO"):
        try:
            return parse_label((info / file).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return DistLabel("unknown", None, ())


def parse_label(text: str) -> DistLabel:
    """The Name, Version and Requires-Dist headers of core metadata ``text``.

    Read by hand: the headers end at the first blank line, and these three never
    continue onto a second line.
    """
    name: str | None = None
    version: str | None = None
    requires: list[str] = []
    for line in text.splitlines():
        if not line:
            break
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
        elif key == "Requires-Dist":
            requires.append(value.strip())
    return DistLabel(name or "unknown", version, tuple(requires))


def _metadata_folders(folder: str) -> list[str]:
    """The names of the metadata folders in ``folder``, sorted."""
    try:
        with os.scandir(folder) as scan:
            return sorted(e.name for e in scan if e.name.endswith(_SUFFIXES))
    except OSError:
        return []


def _group_lines(path: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each entry in section ``[group]`` of an entry_points.txt."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            inside = line == f"[{group}]"
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found


def _from_archive(entry: str, group: str, seen: set[str]) -> list[FoundEntryPoint]:
    """Entry points of distributions in a zip archive on ``sys.path`` (rare)."""
    if not entry or not os.path.isfile(entry):
        return []
    # Imported here: only an archive on sys.path needs the full metadata machinery.
    import importlib_metadata

    found: list[FoundEntryPoint] = []
    for dist in importlib_metadata.distributions(path=[entry]):
        label = parse_label(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "")
        if _normalized(label.name) in seen:
            continue
        seen.add(_normalized(label.name))
        found.extend(FoundEntryPoint(ep.name, ep.value, label) for ep in dist.entry_points
                     if ep.group == group)
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()
