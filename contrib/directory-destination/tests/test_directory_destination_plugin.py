"""The plugin: configuration, the destinations and published-ref hooks, telemetry."""

from __future__ import annotations

import hostcore_directory_destination.plugin as directory_plugin
import importlib_metadata
import pytest
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.errors import ConfigError
from hostcore.evidence.store import EvidenceRow
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import Exporter
from hostcore.export.ref import Ref


def configured(make_host, path):
    return make_host(directory_plugin,
                     config={"plugins": {"directory-destination": {"path": str(path)}}})


def test_entry_point_is_declared():
    eps = importlib_metadata.entry_points(group="hostcore", name="directory-destination")
    assert [ep.value for ep in eps] == ["hostcore_directory_destination.plugin"]


def test_unconfigured_destination_registers_as_unavailable(make_host):
    host = make_host(directory_plugin)
    (destination,) = host.destinations
    assert destination.availability() is not None
    assert host.hook.hostcore_published_ref(stream="main", host=host,
                                            destination=destination) is None
    unavailable = r"no export destination is available \(directory: no folder"
    with pytest.raises(ConfigError, match=unavailable):
        select_destination(host)


def test_relative_path_is_taken_from_the_state_root(make_host):
    host = configured(make_host, "outbox")
    (destination,) = host.destinations
    assert destination.path == host.root / "outbox"
    assert destination.key == f"directory:{host.root / 'outbox'}"


def test_unknown_config_key_is_a_config_error(make_host):
    with pytest.raises(ConfigError, match="pth"):
        make_host(directory_plugin, config={"plugins": {"directory-destination": {"pth": "x"}}})


def test_published_ref_hook_answers_for_this_hosts_store(make_host, tmp_path):
    host = configured(make_host, tmp_path / "outbox")
    (destination,) = host.destinations
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/w", payload={})])
    assert host.hook.hostcore_published_ref(stream="main", host=host,
                                            destination=destination) == Ref()
    Exporter(host, select_destination(host)).run()
    published = host.hook.hostcore_published_ref(stream="main", host=host,
                                                 destination=destination)
    assert published.content == 1 and published.context and published.decisions


def test_published_ref_hook_answers_only_for_its_own_folder(make_host, tmp_path):
    host = configured(make_host, tmp_path / "outbox")
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/w", payload={})])
    Exporter(host, select_destination(host)).run()
    elsewhere = DirectoryDestination(tmp_path / "elsewhere")
    assert host.hook.hostcore_published_ref(stream="main", host=host,
                                            destination=elsewhere) is None
    assert host.hook.hostcore_published_ref(stream="main", host=host,
                                            destination=object()) is None


def test_recovery_is_reported_as_counts(make_host, tmp_path, collected_events):
    host = configured(make_host, tmp_path / "outbox")
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/w", payload={})])
    Exporter(host, select_destination(host)).run()
    (segment,) = (tmp_path / "outbox").glob("main/*/*.jsonl")
    with open(segment, "ab") as handle:
        handle.write(b'[2,"se')
    host.store.append([EvidenceRow(partition="p", source_id="s", directory="/w", payload={})])
    assert Exporter(host, select_destination(host)).run().rows == 1
    assert [e.attributes for e in collected_events.named("directory_destination.recovered")] == [
        {"torn_bytes": 6, "segments_dropped": 0}
    ]
