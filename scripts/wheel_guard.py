"""A pytest plugin for ``scripts/test-wheels``: the run must use the installed wheels.

``HOSTCORE_WHEEL_GUARD`` names the first-party distributions (comma-separated). When
the session starts, each must be installed in this interpreter's environment, not as an
editable install, and each of its top-level packages must resolve inside the
environment's site-packages; once the tests are collected, no module of theirs may
have been imported from anywhere else. Either failure stops the run with one line
naming the module and where it came from.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
import sysconfig
from pathlib import Path

import pytest

ENV = "HOSTCORE_WHEEL_GUARD"


def _site_folders() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple({Path(paths["purelib"]).resolve(), Path(paths["platlib"]).resolve()})


def _first_party_packages() -> dict[str, str]:
    """Top-level import name -> distribution, for every distribution the guard names."""
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    if not names:
        raise pytest.UsageError(f"wheel_guard: {ENV} names no distribution")
    packages: dict[str, str] = {}
    for name in sorted(names):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise pytest.UsageError(f"wheel_guard: {name} is not installed") from None
        direct = dist.read_text("direct_url.json")
        if direct and json.loads(direct).get("dir_info", {}).get("editable"):
            raise pytest.UsageError(f"wheel_guard: {name} is an editable install")
        top = (dist.read_text("top_level.txt") or "").split()
        top += [f.parts[0] for f in dist.files or () if len(f.parts) > 1
                and f.parts[1] == "__init__.py"]
        packages.update({t: name for t in top})
    return packages


def _outside(origin: str | None, site: tuple[Path, ...]) -> bool:
    if origin is None:
        return True
    return not any(Path(origin).resolve().is_relative_to(s) for s in site)


def pytest_sessionstart(session: pytest.Session) -> None:
    site = _site_folders()
    for package, dist in sorted(_first_party_packages().items()):
        spec = importlib.util.find_spec(package)
        origin = spec.origin if spec else None
        if _outside(origin, site):
            raise pytest.UsageError(
                f"wheel_guard: {package} ({dist}) resolves to {origin}, not the installed wheel")


def pytest_collection_finish(session: pytest.Session) -> None:
    site = _site_folders()
    packages = _first_party_packages()
    for name, module in sorted(sys.modules.items()):
        if name.split(".")[0] in packages and _outside(getattr(module, "__file__", None), site):
            raise pytest.UsageError(
                f"wheel_guard: {name} was imported from {getattr(module, '__file__', None)}, "
                "not the installed wheel")
