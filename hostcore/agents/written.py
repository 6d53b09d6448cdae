"""The files a file-writing tool wrote, read from a PostToolUse's ``tool_input``.

Claude Code's ``Write``, ``Edit`` and ``MultiEdit`` name their file in
``file_path``, ``NotebookEdit`` in ``notebook_path``; Codex's ``apply_patch``
carries the patch itself in ``command``, whose ``*** Add File:``,
``*** Update File:`` and ``*** Move to:`` lines name what it wrote (a deleted file
is not written). Only those fields are decoded: the content a tool wrote is
skipped unread. A path the agent gave relative is taken against the event's
``cwd``.
"""

from __future__ import annotations

import os

import msgspec

# Tool name -> the tool_input field naming the one file it wrote.
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path"}
PATCH_TOOLS = frozenset({"apply_patch"})
# The patch lines naming a file the patch leaves written (Codex's patch format).
_WRITTEN_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Move to: ")


class _FileInput(msgspec.Struct):
    file_path: str | None = None
    notebook_path: str | None = None


class _PatchInput(msgspec.Struct):
    command: str | None = None


_file_decoder = msgspec.json.Decoder(_FileInput)
_patch_decoder = msgspec.json.Decoder(_PatchInput)


def writes_files(tool_name: str | None) -> bool:
    """Whether a tool of this name writes files hostcore can name."""
    return tool_name in FILE_TOOLS or tool_name in PATCH_TOOLS


def written_paths(tool_name: str | None, tool_input: msgspec.Raw, cwd: str) -> tuple[str, ...]:
    """The files ``tool_name`` wrote, from its ``tool_input`` (none for another tool, or
    an input of another shape: a newer agent's, which names nothing this can use)."""
    if not tool_input or not writes_files(tool_name):
        return ()
    named: list[str] = []
    try:
        if tool_name in PATCH_TOOLS:
            patch = _patch_decoder.decode(tool_input).command or ""
            named = [line[len(header):].strip() for line in patch.splitlines()
                     for header in _WRITTEN_HEADERS if line.startswith(header)]
        else:
            decoded = _file_decoder.decode(tool_input)
            found = getattr(decoded, FILE_TOOLS[tool_name or ""])
            named = [found] if found else []
    except (msgspec.ValidationError, msgspec.DecodeError):
        return ()
    paths = (os.path.join(cwd, name) if cwd else name for name in named if name)
    return tuple(dict.fromkeys(paths))  # a patch updating then moving a file names it once
