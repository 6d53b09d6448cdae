"""The hostcore plugin: one provider over the task folders named in the config.

``hostcore.toml``::

    [plugins.task-folder]
    folders = { inbox = "~/tasks/inbox", work = "~/tasks/work" }

Each folder is a scope (its key); a task's ref is ``task:<scope>/<id>``. The
provider never guesses:

* a folder it cannot list is a ``failed`` scope, and a folder with an unreadable
  task file an ``interrupted`` one (its readable tasks are still listed), so the
  poller never takes a task missing from an incomplete listing for a closed one;
* ``closure`` answers from the task's file (``done`` → closed as completed,
  ``dropped`` → closed as not planned) and raises ``ProviderError`` when the file
  is gone or unreadable: a deleted file is not proof that the task was done.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec

from hostcore import hookimpl
from hostcore.plugin import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)
from task_folder_provider.tasks import SUFFIX, TaskFileError, read_folder, read_task, valid_id

if TYPE_CHECKING:
    from hostcore import Host

PLUGIN_NAME = "task-folder"
REF_PREFIX = "task:"
CLOSED_REASONS = {"done": "completed", "dropped": "not_planned"}


# A scope name is one word of a ref (``task:<scope>/<id>``), so it holds no "/".
ScopeName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


class TaskFolderConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.task-folder]`` table: scope name → folder."""

    folders: dict[ScopeName, str] = msgspec.field(default_factory=dict)


class TaskFolderProvider:
    """Work items from folders of task files, one scope per folder."""

    name = PLUGIN_NAME

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = dict(sorted(folders.items()))

    def configured(self) -> bool:
        """Whether any folder is configured: installed but unconfigured is normal (the
        README's quickstart), so ``hostcore poll --once`` does not fail for it."""
        return bool(self.folders)

    def availability(self) -> str | None:
        if not self.folders:
            return f"no task folder configured: set folders in [plugins.{PLUGIN_NAME}]"
        return None

    def status(self) -> dict[str, int | bool]:
        return {"configured": self.configured(), "folders": len(self.folders)}

    def _split(self, ref: WorkItemRef) -> tuple[str, str] | None:
        if not ref.ref.startswith(REF_PREFIX):
            return None
        scope, sep, task_id = ref.ref[len(REF_PREFIX):].partition("/")
        if not sep or scope not in self.folders or not valid_id(task_id):
            return None
        return scope, task_id

    def owns(self, ref: WorkItemRef) -> bool:
        return self._split(ref) is not None

    def scope_of(self, ref: WorkItemRef) -> str:
        parts = self._split(ref)
        if parts is None:
            raise ValueError(f"{ref.ref!r} is not a task of a configured folder")
        return parts[0]

    def list_items(self) -> Listing:
        return Listing(tuple(self._list(scope, folder) for scope, folder in self.folders.items()))

    def _list(self, scope: str, folder: Path) -> ScopeListing:
        try:
            tasks, problems = read_folder(folder)
        except TaskFileError as exc:
            return ScopeListing(scope=scope, status="failed", reason=str(exc))
        items = tuple(
            WorkItem(ref=WorkItemRef(f"{REF_PREFIX}{scope}/{task.id}"), title=task.title,
                     updated_at=task.updated)
            for task in tasks if task.state == "open"
        )
        if problems:
            reason = f"{len(problems)} unreadable task file(s), first: {problems[0]}"
            return ScopeListing(scope=scope, status="interrupted", items=items, reason=reason)
        return ScopeListing(scope=scope, status="complete", items=items)

    def closure(self, ref: WorkItemRef) -> Closure:
        parts = self._split(ref)
        if parts is None:
            raise ProviderError(f"{ref.ref}: not a task of a configured folder", ref=ref.ref)
        scope, task_id = parts
        path = self.folders[scope] / f"{task_id}{SUFFIX}"
        if not path.exists():
            raise ProviderError(f"{ref.ref}: no task file {path.name} (deleted or moved?)",
                                ref=ref.ref, scope=scope)
        try:
            task = read_task(path)
        except TaskFileError as exc:
            raise ProviderError(f"{ref.ref}: {exc}", ref=ref.ref, scope=scope) from None
        if task.state == "open":
            return Closure(state="open")
        return Closure(state="closed", state_reason=CLOSED_REASONS[task.state])


@hookimpl
def hostcore_providers(host: Host) -> TaskFolderProvider:
    config = host.plugin_config(PLUGIN_NAME, TaskFolderConfig)
    # Relative folders are taken from the state root, like other hostcore paths.
    folders = {scope: host.root / Path(folder).expanduser()
               for scope, folder in config.folders.items()}
    return TaskFolderProvider(folders)
