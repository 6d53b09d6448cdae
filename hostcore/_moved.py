"""Aliases for the module paths of hostcore 0.1, which moved in 0.2.

Each old module is a short file calling :func:`alias`: importing it warns once
and hands back the new module itself (not a copy), so ``from hostcore.store
import Store`` and ``monkeypatch`` on the old name keep working. Where 0.1 kept
names in that module that now live elsewhere (or were renamed), ``elsewhere``
names them, and the new module answers them too (a module ``__getattr__``, so
they never shadow its own names and ``dir()`` does not list them). The aliases
go away in 0.3; ``docs/architecture.md`` lists where each went.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def alias(old: str, new: str, elsewhere: Mapping[str, str | Callable[[], Any]] | None = None
          ) -> None:
    """Make ``old`` (the module being imported) the module ``new``, with a warning.

    ``elsewhere`` maps a 0.1 name of ``old`` to ``"module.attribute"`` where it
    lives now, or to a function that builds it (a value whose meaning changed).
    """
    warnings.warn(f"{old} moved to {new}; import from there (the old path goes in 0.3)",
                  DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    if elsewhere:
        _answer(module, dict(elsewhere))
    sys.modules[old] = module


def _answer(module: types.ModuleType, elsewhere: dict[str, str | Callable[[], Any]]) -> None:
    """Let ``module`` answer the names in ``elsewhere`` it does not define itself."""
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        found = elsewhere.get(name)
        if found is None:
            if previous is not None:
                return previous(name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        if callable(found):
            return found()
        home, _, attribute = found.rpartition(".")
        return getattr(importlib.import_module(home), attribute)

    module.__dict__["__getattr__"] = __getattr__
