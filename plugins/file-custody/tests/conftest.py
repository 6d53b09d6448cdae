"""Shared fixtures of the file custody tests."""

from __future__ import annotations

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
