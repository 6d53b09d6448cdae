"""The file custody worker passes hostcore's worker conformance suite."""

from __future__ import annotations

import hostcore_file_custody.plugin as custody_plugin
import hostcore_file_custody.testing as scenarios
import pytest
from hostcore_file_custody import HeartbeatRegistry

from hostcore.testing import WorkerConformance


class TestFileCustodyWorkerConformance(WorkerConformance):
    @pytest.fixture
    def plugin(self):
        return custody_plugin

    @pytest.fixture
    def plugin_config(self):
        return {"plugins": {"file-custody": {"directory": "agents"}}}

    @pytest.fixture
    def seed_work(self):
        def plant(host):
            registry = HeartbeatRegistry(host.root / "agents").ensure()
            for instance in ("alpha", "beta", "gamma"):
                scenarios.plant_stale(registry, instance)
        return plant


class TestFileCustodyWorkerWithoutARegistryConformance(WorkerConformance):
    """No registry folder at all: the worker still keeps every contract."""

    @pytest.fixture
    def plugin(self):
        return custody_plugin
