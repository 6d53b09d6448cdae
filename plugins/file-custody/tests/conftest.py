"""Shared fixtures of the file custody tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import hostcore_file_custody.plugin as custody_plugin
import hostcore_file_custody.testing as scenarios
import pytest
from hostcore_file_custody import HeartbeatRegistry


@pytest.fixture
def registry(tmp_path: Path) -> HeartbeatRegistry:
    return HeartbeatRegistry(tmp_path / "registry").ensure()


@pytest.fixture
def custody_host(make_host: Callable[..., object]) -> object:
    """A host with the file custody plugin, whose events the ``collected_events`` fixture sees."""
    return make_host(custody_plugin)


@pytest.fixture
def kit() -> ModuleType:
    """The scenario builders of :mod:`hostcore_file_custody.testing`."""
    return scenarios


def _load_faults() -> ModuleType:
    # Test modules are imported by path (--import-mode=importlib): load the helper so too.
    spec = importlib.util.spec_from_file_location("custody_faults",
                                                  Path(__file__).with_name("faults.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FAULTS = _load_faults()


@pytest.fixture
def faults() -> ModuleType:
    """Runners for scenarios where the system really refuses (see ``faults.py``)."""
    return FAULTS


@pytest.fixture
def kill_at() -> Callable[..., str]:
    """``faults.kill_at``: the kill child SIGKILLed at the step it reports."""
    kill: Callable[..., str] = FAULTS.kill_at
    return kill
