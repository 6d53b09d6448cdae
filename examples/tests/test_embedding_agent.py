"""The embedding-agent example runs, in-process and as a script, and tells its story."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.testing import PolicyInputConformance, TelemetrySinkConformance

EXAMPLE = Path(__file__).resolve().parents[1] / "embedding_agent.py"


def load_example():
    spec = importlib.util.spec_from_file_location("embedding_agent_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agent_hears_its_task_open_and_close_and_sees_governance_move(tmp_path):
    outcome = load_example().main(tmp_path / "root")
    assert outcome["work_item_events"] == [("opened", "agent:1"), ("closed", "agent:1")]
    assert outcome["freshness"] == [[], ["decisions"], ["context"], []]
    telemetry = outcome["telemetry"]
    assert telemetry["tick.completed"] == 3
    assert telemetry["poll.closure_detected"] == 1
    assert outcome["status"]["telemetry"]["sink_failures"] == {}


def test_the_agents_policy_input_withholds_its_private_directory_from_the_export(tmp_path):
    example = load_example()
    agent = example.Agent()
    with example.build_host(tmp_path / "root", agent) as host:
        agent.private.directories.add("/home/someone/clients/acme")
        assert host.policy.withholds("/home/someone/clients/acme", "codex")
        assert not host.policy.withholds("/home/someone/oss", "codex")


def test_the_example_runs_as_a_script(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "root")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "work item agent:1: opened" in done.stdout
    assert "work item agent:1: closed" in done.stdout
    assert "freshness check 3: context" in done.stdout


class TestTheAgentsSinkConformance(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return load_example().Agent()


class TestTheAgentsPolicyInputConformance(PolicyInputConformance):
    @pytest.fixture
    def plugin(self):
        return load_example().Agent()

    @pytest.fixture
    def sample_directories(self):
        return ("/home/someone/clients/acme", "/home/someone/oss")

    @pytest.fixture
    def change_policy(self, plugin):
        return lambda host: plugin.private.directories.add("/home/someone/clients/acme")
