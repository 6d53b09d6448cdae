"""hostcore.msgspec_import: msgspec imported without typing_extensions and without
the whole of ``platform`` (uuid's one call at import is answered by a stand-in),
leaving both importable as themselves."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


AFTER = """
import sys
from hostcore.msgspec_import import import_msgspec
{before}
import_msgspec()
loaded = 'platform' in sys.modules, 'typing_extensions' in sys.modules
import uuid, platform
print(loaded, uuid._LINUX == (platform.system() == 'Linux'),
      uuid._AIX == (platform.system() == 'AIX'), hasattr(uuid, 'platform'),
      bool(platform.machine()), len(str(uuid.uuid1())), 'msgspec' in sys.modules)
"""


def test_msgspec_comes_without_platform_and_uuid_answers_as_it_would():
    # Where uuid asks platform nothing (macOS, Windows), the same holds: no stand-in.
    assert run(AFTER.format(before="")) == "(False, False) True True False True 36 True"


def test_a_platform_imported_before_is_left_as_it_is():
    found = run(AFTER.format(before="import platform; real = platform") + "print(platform is real)")
    assert found.splitlines() == ["(True, False) True True True True 36 True", "True"]
