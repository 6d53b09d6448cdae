"""The JSONL sink passes hostcore's telemetry-sink conformance suite, rotating as it goes."""

from __future__ import annotations

import hostcore_jsonl_sink.plugin as jsonl_plugin
import pytest

from hostcore.testing import TelemetrySinkConformance


class TestJsonlSinkConformance(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return jsonl_plugin


class TestRotatingJsonlSinkConformance(TelemetrySinkConformance):
    """Small files: the suite's events force rotations while it runs."""

    @pytest.fixture
    def plugin(self):
        return jsonl_plugin

    @pytest.fixture
    def plugin_config(self):
        return {"plugins": {"jsonl-sink": {"max_bytes": 2048, "keep": 1}}}
