"""The PostgreSQL destination passes hostcore's destination conformance suite."""

from __future__ import annotations

import hostcore_postgres.plugin as postgres_plugin
import pytest

from hostcore.testing import DestinationConformance


class TestPostgresDestinationConformance(DestinationConformance):
    @pytest.fixture
    def plugin(self):
        return postgres_plugin

    @pytest.fixture
    def plugin_config(self, pg):
        return pg.config()

    @pytest.fixture
    def held_positions(self, pg):
        def read_back(host, stream, origin):
            return pg.held(origin, stream)
        return read_back
