"""Shared helpers for the jsonl-sink tests, as fixtures returning functions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hostcore.telemetry import Event


def _make_event(n: int, padding: int = 0) -> Event:
    attributes: dict[str, int | bool | str] = {"n": n}
    if padding:
        attributes["pad"] = "x" * padding
    return Event(name="test.event", ts=1000.0 + n, attributes=attributes)


def _read_lines(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines()]


@pytest.fixture
def make_event() -> Callable[..., Event]:
    """``make_event(n, padding=0)``: a distinct event; padding widens its line."""
    return _make_event


@pytest.fixture
def read_lines() -> Callable[[list[Path]], list[dict[str, Any]]]:
    """Parse every line of the given files, in order."""
    return _read_lines
