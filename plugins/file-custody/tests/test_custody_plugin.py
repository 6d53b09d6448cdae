"""The plugin as a host sees it: events, the worker, configuration and the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import hostcore_file_custody.plugin as custody_plugin
import pytest
from hostcore_file_custody import HeartbeatRegistry, capture_file_revision, delete_file_if_unchanged
from hostcore_file_custody.events import EVENTS
from hostcore_file_custody.worker import registry_for

from hostcore.errors import ConfigError
from hostcore.files import atomic_write

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_plugin_catalogues_its_events(custody_host):
    for spec in EVENTS:
        assert spec.name in custody_host.catalog


def test_every_event_has_a_section_in_the_event_catalog():
    headings = {line[3:].strip() for line in (DOCS / "events.md").read_text().splitlines()
                if line.startswith("## ")}
    assert {spec.name for spec in EVENTS} <= headings


def test_the_worker_does_nothing_without_a_registry(make_host):
    host = make_host(custody_plugin)
    step = next(s for s in host.tick().steps if s.name == "file-custody")
    assert step.ok and step.counts == {"registries": 0}
    assert not (host.root / "plugins" / "file-custody").exists()


def test_the_worker_recovers_then_sweeps_the_configured_registry(make_host, tmp_path, kit,
                                                                collected_events):
    registry = HeartbeatRegistry(tmp_path / "agents").ensure()
    planted = kit.plant_stale(registry, "alpha")
    host = make_host(custody_plugin,
                     config={"plugins": {"file-custody": {"directory": str(registry.root)}}})

    step = next(s for s in host.tick().steps if s.name == "file-custody")

    assert step.ok, step.error
    assert step.counts["sweep_deleted"] == 1 and step.counts["sweep_dependents_deleted"] == 2
    assert not registry.heartbeat_path("alpha").exists()
    names = collected_events.names()
    assert names.index("custody.recovery_completed") < names.index("lifecycle.sweep_observed") \
        < names.index("custody.sweep_completed")
    assert kit.observations(registry) == [planted.generation_id]


def test_a_relative_registry_directory_is_under_the_host_root(make_host, kit):
    host = make_host(custody_plugin, config={"plugins": {"file-custody": {"directory": "agents"}}})
    registry = HeartbeatRegistry(host.root / "agents").ensure()
    kit.plant_stale(registry, "alpha")
    step = next(s for s in host.tick().steps if s.name == "file-custody")
    assert step.counts["sweep_deleted"] == 1


def test_an_unknown_config_key_is_a_config_error(make_host):
    with pytest.raises(ConfigError, match=r"plugins\.file-custody.*dir"):
        make_host(custody_plugin, config={"plugins": {"file-custody": {"dir": "x"}}})


def _cli_registry(tmp_path: Path) -> HeartbeatRegistry:
    return HeartbeatRegistry(tmp_path / "cli-root" / "plugins" / "file-custody" / "registry")


def test_custody_status_reports_counts_as_json(hostcore_cli, register_plugin, tmp_path, kit):
    register_plugin(custody_plugin)
    registry = _cli_registry(tmp_path).ensure()
    kit.plant_stale(registry, "alpha")
    with registry.start_session("beta"):
        result = hostcore_cli("custody", "status", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["exists"] is True
    assert report["counts"]["heartbeats"] == 2 and report["counts"]["stale_heartbeats"] == 1
    assert report["folders"]["heartbeats"]["pins"] == 0


def test_hostcore_status_shows_the_registry_counts(make_host, kit):
    host = make_host(custody_plugin)
    kit.plant_stale(registry_for(host), "alpha")
    entry = host.status()["components"]["worker"]["file-custody"]
    assert entry["heartbeats"] == 1 and entry["stale_heartbeats"] == 1
    assert entry["pending_pins"] == 0


def test_custody_status_of_a_missing_registry(hostcore_cli, register_plugin):
    register_plugin(custody_plugin)
    result = hostcore_cli("custody", "status")
    assert result.exit_code == 0 and "does not exist" in result.stdout


def test_custody_recover_restores_a_dead_owners_pin(hostcore_cli, register_plugin, tmp_path,
                                                    kit):
    register_plugin(custody_plugin)
    registry = _cli_registry(tmp_path).ensure()
    path = registry.heartbeat_path("alpha")
    atomic_write(path, b"{}")
    revision = capture_file_revision(path)

    def collide(_pinned):
        atomic_write(path, b"newer")
        return False

    retained = delete_file_if_unchanged(path, revision, collide)
    os.unlink(path)
    result = hostcore_cli("custody", "recover", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["restored"] == 1
    assert report["results"][0]["source_path"] == str(path)
    assert path.read_bytes() == b"{}" and retained.outcome == "retained"
    table = hostcore_cli("custody", "recover")
    assert table.exit_code == 0 and "nothing to recover" in table.stdout

