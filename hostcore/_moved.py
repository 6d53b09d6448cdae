"""Aliases for the module paths of hostcore 0.1, which moved in 0.2.

Each old module is a two-line file calling :func:`alias`: importing it warns
once and hands back the new module itself (not a copy), so ``from
hostcore.store import Store`` and ``monkeypatch`` on the old name keep working.
The aliases go away in 0.3; ``docs/architecture.md`` lists where each went.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make ``old`` (the module being imported) the module ``new``, with a warning."""
    warnings.warn(f"{old} moved to {new}; import from there (the old path goes in 0.3)",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
