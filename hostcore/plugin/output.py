"""Text for the terminal without click: JSON as every command prints it, and a line.

:func:`hostcore.plugin.cli.emit_json` prints :func:`json_text` through click;
the lean path of ``run --once`` and ``status --json`` (:mod:`hostcore.cli.lean`)
prints the same text through :func:`echo`, with click never imported.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

__all__ = ["echo", "json_text"]


def json_text(data: Any, *, indent: int | None = None) -> str:
    """``data`` (Structs, dicts, lists) as JSON with sorted keys, on one line or
    indented by ``indent``; text outside ASCII is escaped (``\\u00e9``), so any
    terminal encoding can print it."""
    text = msgspec.json.encode(data, order="sorted")
    if indent is not None:
        text = msgspec.json.format(text, indent=indent)
    found = text.decode()
    return found if found.isascii() else _stdlib_json(data, indent=indent)


def _stdlib_json(data: Any, *, indent: int | None = None) -> str:
    # The json module costs a cold start a millisecond and a half; the common
    # outputs (status, plugins, a tick's lines) are written by msgspec and never
    # import it: only text outside ASCII, which msgspec cannot escape, needs it.
    import json

    return json.dumps(msgspec.to_builtins(data), indent=indent, sort_keys=True)


def echo(message: str, *, err: bool = False, nl: bool = True) -> None:
    """Write ``message`` (and a newline unless ``nl`` is false) to stdout, or stderr
    with ``err``, and flush it: what ``click.echo`` does with plain text."""
    stream = sys.stderr if err else sys.stdout
    stream.write(message + "\n" if nl else message)
    stream.flush()
