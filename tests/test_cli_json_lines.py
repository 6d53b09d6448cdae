"""``emit_json_line``: one line of JSON per report, keys sorted, ASCII only, written
by msgspec (a tick's ``--json`` lines import no stdlib ``json``)."""

from __future__ import annotations

import json

import click
import msgspec
from click.testing import CliRunner

from hostcore.plugin.cli import emit_json_line


class Step(msgspec.Struct):
    name: str
    ok: bool
    counts: dict[str, int] = msgspec.field(default_factory=dict)


def printed(data: object) -> str:
    @click.command()
    def show() -> None:
        emit_json_line(data)

    result = CliRunner().invoke(show, [])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_report_is_one_line_with_its_keys_sorted_at_every_level():
    data = {"steps": [Step("ingest", True, {"rows": 2, "files": 1})], "ok": True,
            "duration_ms": 3}
    out = printed(data)
    assert out.endswith("\n") and out.count("\n") == 1
    assert json.loads(out) == {"duration_ms": 3, "ok": True, "steps": [
        {"counts": {"files": 1, "rows": 2}, "name": "ingest", "ok": True}]}
    assert out.index('"duration_ms"') < out.index('"ok"') < out.index('"steps"')
    assert out.index('"files"') < out.index('"rows"')


def test_text_outside_ascii_is_escaped_and_reads_back_the_same():
    out = printed({"name": "caf\u00e9 \U0001f600", "a": 1})
    assert out.isascii() and "\\u00e9" in out
    assert json.loads(out) == {"a": 1, "name": "caf\u00e9 \U0001f600"}
