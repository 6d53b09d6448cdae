"""The logging sink passes hostcore's telemetry-sink conformance suite."""

from __future__ import annotations

import hostcore_logging_sink.plugin as logging_plugin
import pytest

from hostcore.testing import TelemetrySinkConformance


class TestLoggingSinkConformance(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return logging_plugin
