"""Two Hosts in one process share nothing: plugins, state, configuration or events."""

from __future__ import annotations

import pytest

from hostcore import EventSpec, Host, hookimpl
from hostcore.errors import TelemetryError
from hostcore.plugin.registration import WorkerResult


class Counting:
    """A plugin with one worker, one event and one sink, all private to its instance."""

    def __init__(self, tag: str) -> None:
        self.__name__ = f"counting-{tag}"
        self.tag = tag
        self.runs = 0
        self.received: list[str] = []
        plugin = self

        class Worker:
            name = f"worker-{tag}"

            def run(self, host: Host) -> WorkerResult:
                plugin.runs += 1
                host.emit(f"{tag}.ran", runs=plugin.runs)
                return WorkerResult()

        class Sink:
            name = f"sink-{tag}"

            def receive(self, event) -> None:
                plugin.received.append(event.name)

        self.worker, self.sink = Worker(), Sink()

    @hookimpl
    def hostcore_workers(self):
        return self.worker

    @hookimpl
    def hostcore_telemetry_sinks(self):
        return self.sink

    @hookimpl
    def hostcore_events(self):
        return EventSpec(f"{self.tag}.ran", {"runs": int}, "test event")


@pytest.fixture
def two_hosts(tmp_path):
    a, b = Counting("a"), Counting("b")
    host_a = Host(root=tmp_path / "a", plugins=[a], load_entrypoints=False, env={},
                  config={"run": {"interval_seconds": 5}})
    host_b = Host(root=tmp_path / "b", plugins=[b], load_entrypoints=False, env={})
    yield (host_a, a), (host_b, b)
    host_a.close()
    host_b.close()


def test_each_host_sees_only_its_own_plugins(two_hosts):
    (host_a, _), (host_b, _) = two_hosts
    assert "worker-a" in [w.name for w in host_a.workers]
    assert "worker-b" not in [w.name for w in host_a.workers]
    assert "worker-b" in [w.name for w in host_b.workers]
    assert "worker-a" not in [w.name for w in host_b.workers]
    assert "counting-a" in host_a.plugins.infos
    assert "counting-a" not in host_b.plugins.infos
    assert host_a.plugins.pm is not host_b.plugins.pm


def test_each_host_runs_only_its_own_workers(two_hosts):
    (host_a, a), (host_b, b) = two_hosts
    host_a.tick()
    host_a.tick()
    host_b.tick()
    assert (a.runs, b.runs) == (2, 1)


def test_events_reach_only_the_emitting_hosts_sinks_and_catalog(two_hosts):
    (host_a, a), (host_b, b) = two_hosts
    a.received.clear()
    b.received.clear()
    host_a.tick()
    assert {"a.ran", "tick.completed"} <= set(a.received)
    assert b.received == []
    with pytest.raises(TelemetryError, match=r"a\.ran"):
        host_b.emit("a.ran", runs=1)


def test_state_and_config_are_per_root(two_hosts, tmp_path):
    (host_a, _), (host_b, _) = two_hosts
    assert host_a.state_dir("x") == (tmp_path / "a" / "plugins" / "x").resolve()
    assert host_b.state_dir("x") == (tmp_path / "b" / "plugins" / "x").resolve()
    assert host_a.config.settings.run.interval_seconds == 5
    assert host_b.config.settings.run.interval_seconds == 60


def test_one_plugin_module_serves_two_hosts_independently(tmp_path):
    shared = Counting("s")
    first = Host(root=tmp_path / "1", plugins=[shared], load_entrypoints=False, env={})
    second = Host(root=tmp_path / "2", plugins=[shared], load_entrypoints=False, env={})
    first.close()
    # Closing one host leaves the other's registrations and hooks working.
    assert second.tick().ok
    assert shared.runs == 1
    second.close()
