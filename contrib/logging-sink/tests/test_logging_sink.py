"""The logging-sink plugin: records per event, configured logger and level, entry point."""

from __future__ import annotations

import logging

import hostcore_logging_sink.plugin as logging_plugin
import importlib_metadata
import pytest
from hostcore_logging_sink.sink import LoggingSink

from hostcore.errors import ConfigError
from hostcore.telemetry import Event


def test_each_event_becomes_one_record_with_sorted_attributes(make_host, caplog):
    caplog.set_level(logging.INFO, logger="hostcore.events")
    host = make_host(logging_plugin)
    host.tick()
    records = [r for r in caplog.records if r.name == "hostcore.events"]
    names = [r.hostcore_event.name for r in records]
    assert (names[0], names[-1]) == ("plugins.loaded", "tick.completed")
    tick = records[-1]
    assert tick.levelno == logging.INFO
    attributes = tick.hostcore_event.attributes
    assert tick.getMessage() == (
        f"tick.completed duration_ms={attributes['duration_ms']} failed={attributes['failed']} "
        f"pending={attributes['pending']} skipped={attributes['skipped']} "
        f"steps={attributes['steps']}")


def test_message_is_the_name_then_attributes_in_name_order(caplog):
    caplog.set_level(logging.INFO, logger="hostcore.events")
    event = Event(name="demo.done", ts=0.0, attributes={"zeta": 2, "alpha": True, "mode": "full"})
    LoggingSink().receive(event)
    (record,) = caplog.records
    assert record.getMessage() == "demo.done alpha=True mode=full zeta=2"
    assert record.hostcore_event is event


def test_plugin_table_picks_logger_and_level(make_host, caplog):
    caplog.set_level(logging.DEBUG, logger="my.app.telemetry")
    make_host(logging_plugin, config={"plugins": {"logging-sink": {
        "logger": "my.app.telemetry", "level": "DEBUG"}}})
    (record,) = [r for r in caplog.records if r.name == "my.app.telemetry"]
    assert record.levelno == logging.DEBUG
    assert record.getMessage().startswith("plugins.loaded ")
    assert not [r for r in caplog.records if r.name == "hostcore.events"]


def test_nothing_is_formatted_below_the_logger_level(caplog):
    caplog.set_level(logging.WARNING, logger="quiet.events")
    sink = LoggingSink("quiet.events", logging.INFO)
    sink.receive(Event(name="tick.completed", ts=0.0, attributes={"steps": 1}))
    assert not caplog.records


@pytest.mark.parametrize(
    ("table", "named"),
    [({"level": "LOUD"}, "level"), ({"loger": "x"}, "loger"), ({"logger": ""}, "logger")],
)
def test_bad_plugin_table_is_a_config_error_naming_the_key(make_host, table, named):
    with pytest.raises(ConfigError) as excinfo:
        make_host(logging_plugin, config={"plugins": {"logging-sink": table}})
    assert "[plugins.logging-sink]" in str(excinfo.value)
    assert f"`{named}`" in str(excinfo.value)


def test_distribution_entry_point_resolves_to_the_plugin_module():
    (ep,) = importlib_metadata.entry_points(group="hostcore", name="logging-sink")
    assert ep.dist.name == "hostcore-logging-sink"
    assert ep.load() is logging_plugin
