"""Aliases for the module paths of hostcore 0.1, which moved in 0.2.

Each old module is a short file calling :func:`alias`: importing it warns once
and hands back the new module itself (not a copy), so ``from hostcore.store
import Store`` and ``monkeypatch`` on the old name keep working. Where 0.1 kept
names in that module that now live elsewhere (or were renamed), ``elsewhere``
names them, and the old path is a thin module that finds each there and
forwards everything else, writes included, to the new module. The aliases go
away in 0.3; ``docs/architecture.md`` lists where each went.
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
    sys.modules[old] = _Forwarding(old, module, elsewhere) if elsewhere else module


class _Forwarding(types.ModuleType):
    """An old module path: its moved names found where they live now, everything else
    read from and written to the module that replaced it."""

    def __init__(self, name: str, target: types.ModuleType,
                 elsewhere: Mapping[str, str | Callable[[], Any]]) -> None:
        super().__init__(name, target.__doc__)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_elsewhere", dict(elsewhere))

    def __getattr__(self, name: str) -> Any:
        found = self._elsewhere.get(name)
        if found is None:
            return getattr(self._target, name)
        if callable(found):
            return found()
        module, _, attribute = found.rpartition(".")
        return getattr(importlib.import_module(module), attribute)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._target, name)

    def __dir__(self) -> list[str]:
        return sorted({*dir(self._target), *self._elsewhere})
