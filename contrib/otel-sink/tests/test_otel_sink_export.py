"""End to end: hostcore events → the OTLP sink → a real OTLP/HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import hostcore_otel_sink.plugin as otel_plugin
import pytest

from hostcore import ConfigError, EventSpec, hookimpl
from hostcore.plugin.registration import WorkerResult

SECRET_REPOS = ("octo-org/secret-repo", "octo-org/payroll-tool")


class RepoScanner:
    """A worker that handles named repositories and reports only how many."""

    name = "repo-scanner"

    def run(self, host):
        host.emit("demo.scanned", repos=len(SECRET_REPOS), complete=True, mode="full")
        host.emit("demo.scanned", repos=0, complete=False, mode="quick")
        return WorkerResult(pending=False, counts={"repos": len(SECRET_REPOS)})


class ScannerPlugin:
    @hookimpl
    def hostcore_events(self):
        return EventSpec("demo.scanned", {"repos": int, "complete": bool,
                                          "mode": ("full", "quick")}, "A scan finished.")

    @hookimpl
    def hostcore_workers(self, host):
        return RepoScanner()


def otel_config(url: str, **extra: object) -> dict:
    return {"plugins": {"otel-sink": {"endpoint": url, **extra}}}


def test_every_event_of_a_tick_arrives_with_counts_intact_and_no_names(
        make_host, collected_events, otlp_receiver, tmp_path):
    host = make_host(otel_plugin, ScannerPlugin(), config=otel_config(otlp_receiver.url))
    assert host.tick().ok
    host.close()  # flushes; the default batch delay and metric interval have not passed

    emitted = Counter((e.name, tuple(sorted(e.attributes.items())))
                      for e in collected_events.events)
    records = otlp_receiver.received.log_records()
    arrived = Counter((r.name, tuple(sorted(r.attributes.items()))) for r in records)
    assert {name for name, _ in emitted} >= {"plugins.loaded", "demo.scanned", "tick.completed"}
    assert arrived == emitted
    assert all(r.body == r.name for r in records)
    by_ts = {e.name: int(e.ts * 1e9) for e in collected_events.events}
    assert all(r.time_unix_nano == by_ts[r.name] for r in records if r.name != "demo.scanned")

    everything = b"".join(otlp_receiver.received.raw)
    for secret in (*SECRET_REPOS, "secret-repo", str(tmp_path)):
        assert secret.encode() not in everything


def test_counters_count_events_and_sum_count_attributes(make_host, collected_events,
                                                         otlp_receiver):
    host = make_host(otel_plugin, ScannerPlugin(), config=otel_config(otlp_receiver.url))
    host.tick()
    host.tick()
    host.close()

    points = otlp_receiver.received.counter_points()
    scanned = {(a["event.name"], a["mode"], a["complete"]): v
               for a, v in points["hostcore.events"] if a["event.name"] == "demo.scanned"}
    assert scanned == {("demo.scanned", "full", True): 2, ("demo.scanned", "quick", False): 2}
    repos = {(a["mode"], a["complete"]): v for a, v in points["hostcore.demo.scanned.repos"]}
    assert repos == {("full", True): 2 * len(SECRET_REPOS), ("quick", False): 0}
    ticks = sum(v for a, v in points["hostcore.events"] if a["event.name"] == "tick.completed")
    assert ticks == 2
    steps = sum(v for _, v in points["hostcore.tick.completed.steps"])
    assert steps == sum(e.attributes["steps"] for e in collected_events.named("tick.completed"))
    assert steps >= 2


def test_headers_and_service_name_reach_the_collector(make_host, otlp_receiver):
    host = make_host(otel_plugin, config=otel_config(
        otlp_receiver.url, headers={"authorization": "Bearer fleet-token"},
        service_name="agent-box"))
    host.close()

    received = otlp_receiver.received
    assert received.headers and all(h.get("authorization") == "Bearer fleet-token"
                                    for h in received.headers)
    assert {attrs["service.name"] for attrs in received.resource_attributes()} == {"agent-box"}


def test_a_collector_that_is_down_never_fails_a_tick(make_host, otlp_receiver):
    url = otlp_receiver.url
    otlp_receiver.stop()  # nothing listens on that port any more
    host = make_host(otel_plugin, ScannerPlugin(),
                     config=otel_config(url, timeout_seconds=0.5))
    report = host.tick()
    assert report.ok
    started = time.monotonic()
    host.close()
    assert time.monotonic() - started < 15
    sink = host.status()["components"]["telemetry_sink"]["otel"]
    assert sink["events"] >= 3
    assert sink["log_exports_failed"] >= 1 and sink["log_exports_ok"] == 0
    assert host.telemetry.sink_failures == {}


def test_without_an_endpoint_the_sink_is_unavailable_and_says_what_to_set(make_host):
    host = make_host(otel_plugin)
    sink = host.status()["components"]["telemetry_sink"]["otel"]
    assert sink["available"] is False
    assert "[plugins.otel-sink]" in sink["reason"] and "endpoint" in sink["reason"]


def test_an_unconfigured_sink_does_not_import_the_opentelemetry_sdk():
    # A fresh interpreter: another test in this process has imported the SDK already.
    code = ("import sys, tempfile\n"
            "import hostcore_otel_sink.plugin as p\n"
            "from hostcore import Host\n"
            "Host(root=tempfile.mkdtemp(), plugins=[p], load_entrypoints=False, env={}).close()\n"
            "print('opentelemetry.sdk' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("endpoint", ["127.0.0.1:4318", "ftp://collector", ""])
def test_an_endpoint_that_is_not_an_http_url_is_a_config_error_naming_it(make_host, endpoint):
    with pytest.raises(ConfigError) as caught:
        make_host(otel_plugin, config=otel_config(endpoint))
    assert "[plugins.otel-sink]" in str(caught.value) and "endpoint" in str(caught.value)


def test_hostcore_run_once_exports_through_the_installed_entry_point(otlp_receiver, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.otel-sink]\nendpoint = "{otlp_receiver.url}"\n', encoding="utf-8")
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "hostcore-otel-sink"}
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                           "--once"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    names = Counter(r.name for r in otlp_receiver.received.log_records())
    assert names["plugins.loaded"] == 1 and names["tick.completed"] == 1
    loaded = next(r for r in otlp_receiver.received.log_records() if r.name == "plugins.loaded")
    assert loaded.attributes["loaded"] == 1
    assert str(Path(root)).encode() not in b"".join(otlp_receiver.received.raw)
