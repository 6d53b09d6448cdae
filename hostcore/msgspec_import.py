"""msgspec, imported the way a short-lived ``hostcore`` process wants it.

msgspec takes ``get_type_hints``, ``Required`` and ``NotRequired`` from
typing_extensions when that package is installed (other distributions bring it),
and importing typing_extensions, with the inspect, ast and dis it loads, costs about
7 ms: an eighth of an agent's SessionStart hook, a fourteenth of ``hostcore status``.
On Python 3.11 and later those names are typing's own; typing_extensions differs only
for forms it alone defines (``ReadOnly``, until 3.13 has it), which no hostcore record
and no first-party plugin's uses. So the console script and the hook's lean path import
msgspec with typing's (:func:`import_msgspec`); typing_extensions stays importable, as
usual, for whatever imports it afterwards. A program that embeds hostcore imports
msgspec itself, and nothing changes for it.

msgspec also imports uuid, which imports the whole of ``platform`` (2-3 ms, its
patterns and its caches) to call ``platform.system()`` once, at import, on every
POSIX system but macOS. That one call is answered by a stand-in holding just it, the
same answer (``os.uname().sysname``, as ``platform.system()`` gives there): the
stand-in is gone from ``sys.modules`` and from uuid once msgspec is imported, and
``import platform`` afterwards is the real module.

Imports only the standard library.
"""

from __future__ import annotations

import os
import sys
import types


def import_msgspec() -> None:
    """Import msgspec now, not letting it import typing_extensions; nothing when
    either is imported already (or msgspec is missing: its importer then fails)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    # A None entry makes `import typing_extensions` raise ImportError, which msgspec
    # answers by taking typing's names.
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    stand_in = _platform_stand_in()
    try:
        import msgspec  # noqa: F401
    except ImportError:
        pass
    finally:
        del sys.modules["typing_extensions"]
        if stand_in is not None:
            if sys.modules.get("platform") is stand_in:
                del sys.modules["platform"]
            uuid = sys.modules.get("uuid")
            if uuid is not None and vars(uuid).get("platform") is stand_in:
                del uuid.platform


def _platform_stand_in() -> types.ModuleType | None:
    """A ``platform`` with only ``system()``, put in ``sys.modules`` for uuid's import,
    or None where uuid would not ask it (uuid or platform imported already, macOS,
    Windows) or where ``os.uname`` cannot answer."""
    if ("uuid" in sys.modules or "platform" in sys.modules
            or sys.platform in ("win32", "darwin") or not hasattr(os, "uname")):
        return None
    stand_in = types.ModuleType("platform", "hostcore's stand-in while uuid is imported")
    sysname = os.uname().sysname
    stand_in.system = lambda: sysname  # type: ignore[attr-defined]
    sys.modules["platform"] = stand_in
    return stand_in
