"""The directory destination passes hostcore's destination conformance suite."""

from __future__ import annotations

import hostcore_directory_destination.plugin as directory_plugin
import pytest

from hostcore.testing import DestinationConformance


class TestDirectoryDestinationConformance(DestinationConformance):
    @pytest.fixture
    def plugin(self):
        return directory_plugin

    @pytest.fixture
    def plugin_config(self):
        return {"plugins": {"directory-destination": {"path": "outbox"}}}

    @pytest.fixture
    def held_positions(self):
        def read_back(host, stream, origin):
            destination = next(d for d in host.destinations if d.name == "directory")
            return [row.position for row in destination.read_rows(stream, origin)]
        return read_back
