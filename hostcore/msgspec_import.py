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

Imports only the standard library.
"""

from __future__ import annotations

import sys


def import_msgspec() -> None:
    """Import msgspec now, not letting it import typing_extensions; nothing when
    either is imported already (or msgspec is missing: its importer then fails)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    # A None entry makes `import typing_extensions` raise ImportError, which msgspec
    # answers by taking typing's names.
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401
    except ImportError:
        pass
    finally:
        del sys.modules["typing_extensions"]
