"""The OTLP sink passes hostcore's telemetry-sink conformance suite."""

from __future__ import annotations

import hostcore_otel_sink.plugin as otel_plugin
import pytest

from hostcore.testing import TelemetrySinkConformance


class TestOtelSinkConformance(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return otel_plugin

    @pytest.fixture
    def plugin_config(self, module_otlp_receiver):
        return {"plugins": {"otel-sink": {"endpoint": module_otlp_receiver.url}}}


class TestUnconfiguredOtelSinkConformance(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return otel_plugin
