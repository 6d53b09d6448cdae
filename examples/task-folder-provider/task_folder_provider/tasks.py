"""Task files: one TOML file per task, ``<folder>/<id>.toml``::

    title = "Write the release notes"
    state = "open"            # open, done or dropped
    updated = "2024-05-01"    # optional: anything that changes when the task does

This module only reads folders; it knows nothing of hostcore.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

SUFFIX = ".toml"
STATES = ("open", "done", "dropped")
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class TaskFileError(Exception):
    """A task file (or its folder) cannot be read or does not describe a task."""


class Task(NamedTuple):
    id: str
    title: str
    state: str
    updated: str


def valid_id(task_id: str) -> bool:
    """A task id is a plain file stem: no separator, no leading dot."""
    return bool(_TASK_ID.match(task_id)) and not task_id.endswith(SUFFIX)


def read_task(path: Path) -> Task:
    """The task in ``path``; :class:`TaskFileError` naming the file if it is not one."""
    # Imported on first read: listing plugins never reads a task.
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskFileError(f"{path}: {exc}") from None
    state = data.get("state", "open")
    if state not in STATES:
        raise TaskFileError(f"{path}: state must be one of {', '.join(STATES)}, not {state!r}")
    title, updated = data.get("title", ""), data.get("updated", "")
    if not isinstance(title, str) or not isinstance(updated, (str, int)):
        raise TaskFileError(f"{path}: title must be text and updated text or a number")
    return Task(id=path.name[: -len(SUFFIX)], title=title, state=state, updated=str(updated))


def read_folder(folder: Path) -> tuple[list[Task], list[str]]:
    """Every task of ``folder`` and a message per task file that could not be read.

    Raises :class:`TaskFileError` when the folder itself cannot be listed.
    """
    try:
        paths = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX))
    except OSError as exc:
        raise TaskFileError(f"{folder}: {exc}") from None
    tasks, problems = [], []
    for path in paths:
        if not valid_id(path.name[: -len(SUFFIX)]):
            continue  # not a task file by our naming rule (e.g. ".draft.toml")
        try:
            tasks.append(read_task(path))
        except TaskFileError as exc:
            problems.append(str(exc))
    return tasks, problems
