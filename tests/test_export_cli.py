"""``hostcore export`` and the export's part of ``hostcore status``."""

from __future__ import annotations

import json
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.host import Host


@pytest.fixture
def root(tmp_path: Path, register_plugin) -> Path:
    register_plugin(directory_plugin)
    root = tmp_path / "cli-root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{tmp_path / "outbox"}"\n')
    add_rows(root, 5, "/work/a")
    return root


def add_rows(root: Path, count: int, directory: str) -> None:
    host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
    try:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory=directory, payload={"n": i})
                          for i in range(count))
    finally:
        host.close()


def published_file(tmp_path: Path) -> Path:
    """The ref file the folder publishes for the test root's store (its only origin)."""
    (path,) = (tmp_path / "outbox").glob("main/*/ref.json")
    return path


def export_status(hostcore_cli) -> dict:
    result = hostcore_cli("status", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["components"]["worker"]["export"]


def test_export_json_reports_what_was_pushed(hostcore_cli, root, tmp_path):
    result = hostcore_cli("export", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "destination": "directory", "stream": "main", "rows": 5, "batches": 2, "position": 5,
        "carried": ["context", "terms", "decisions"], "done": True, "positions_dropped": False,
        "conflicts": [], "resumed": 0, "cache_saved": True,
    }
    assert len(list((tmp_path / "outbox").glob("main/*/*.jsonl"))) == 1


def test_export_prints_one_summary_line(hostcore_cli, root):
    result = hostcore_cli("export", "--max-rows", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ("exported 2 row(s) to directory in 2 push(es), position 2; "
                             "set context, terms, decisions; more rows remain\n")


def test_export_without_a_destination_is_a_usage_error(hostcore_cli, tmp_path):
    result = hostcore_cli("export", root=tmp_path / "bare")
    assert result.exit_code == 2
    assert "no export destination is registered" in result.stderr


def test_status_shows_rows_behind_then_current(hostcore_cli, root):
    before = export_status(hostcore_cli)
    assert (before["position"], before["rows_behind"]) == (0, 5)
    assert hostcore_cli("export").exit_code == 0
    after = export_status(hostcore_cli)
    assert (after["position"], after["rows_behind"]) == (5, 0)
    assert after["governance"] == {"context": "current", "terms": "current",
                                   "decisions": "current"}
    assert after["local_policy"] == "unchanged since the last push"


def test_after_a_policy_change_status_shows_context_moved(hostcore_cli, root):
    assert hostcore_cli("export").exit_code == 0
    changed = hostcore_cli("policy", "local-only", "/work/b", "--force")
    assert changed.exit_code == 0, changed.stderr
    report = export_status(hostcore_cli)
    assert report["since_last_push"]["context"].startswith("moved ")
    assert report["since_last_push"]["terms"] == "current"
    assert report["local_policy"].startswith("moved since the last push")
    text = hostcore_cli("status", "-v")  # every detail, one per line
    assert "since_last_push: (context moved" in text.stdout
    assert "rows already forwarded are not retracted" in text.stdout
    assert hostcore_cli("export").exit_code == 0  # the push carries the new context
    assert export_status(hostcore_cli)["since_last_push"]["context"] == "current"


def test_status_shows_governance_that_moved_at_the_destination(hostcore_cli, root, tmp_path):
    assert hostcore_cli("export").exit_code == 0
    published = published_file(tmp_path)
    data = json.loads(published.read_text())
    published.write_text(json.dumps({**data, "terms": "e" * 64}))
    report = export_status(hostcore_cli)
    assert report["governance"]["terms"].startswith("moved ")
    assert report["moved_at_destination"] == "terms"
    assert "governance: (context current, terms moved" in hostcore_cli("status", "-v").stdout


def test_a_conflict_exits_1_after_pushing_content_and_names_the_adoption(
        hostcore_cli, root, tmp_path):
    assert hostcore_cli("export").exit_code == 0
    published = published_file(tmp_path)
    published.write_text(json.dumps({**json.loads(published.read_text()), "context": "a" * 64}))
    assert hostcore_cli("policy", "local-only", "/work/b", "--force").exit_code == 0
    add_rows(root, 2, "/work/a")
    result = hostcore_cli("export")
    assert result.exit_code == 1
    assert result.stdout.startswith("exported 2 row(s)")  # content was not stalled
    assert "context moved at the destination 'directory' (stream 'main')" in result.stderr
    assert "this side tried to write" in result.stderr
    assert "Retrying the same write cannot resolve this" in result.stderr
    assert "hostcore export --adopt context=aaaaaaaaaaaa" in result.stderr
    assert "Traceback" not in result.stderr
    report = export_status(hostcore_cli)
    assert report["conflicts"].startswith("context: this host's ")
    assert report["rows_behind"] == 0
    stale = hostcore_cli("export", "--adopt", "context=bbbbbbbbb")
    assert stale.exit_code == 1
    assert "moved since you looked" in stale.stderr
    adopted = hostcore_cli("export", "--adopt", "context=aaaaaaaaaaaa", "--json")
    assert adopted.exit_code == 0, adopted.stderr
    assert json.loads(adopted.stdout)["carried"] == ["context"]
    assert export_status(hostcore_cli)["conflicts"] == "none"


@pytest.mark.parametrize("value", ["context", "colour=abc1234", "context=", "terms=a\tb"])
def test_a_malformed_adopt_is_a_usage_error(hostcore_cli, root, value):
    result = hostcore_cli("export", "--adopt", value)
    assert result.exit_code == 2
    assert "COMPONENT=PREFIX" in result.stderr


def test_the_worker_exports_on_each_tick(hostcore_cli, root, tmp_path):
    result = hostcore_cli("run", "--once", "--json")
    assert result.exit_code == 0, result.stderr
    steps = {s["name"]: s for s in json.loads(result.stdout)["steps"]}
    assert steps["export"]["counts"] == {"rows": 5, "batches": 2, "conflicts": 0}
    assert steps["export"]["pending"] is False


def test_a_destination_that_refuses_exits_1_naming_the_file(hostcore_cli, root, tmp_path):
    assert hostcore_cli("export").exit_code == 0
    published_file(tmp_path).write_bytes(b"\x00garbage")
    result = hostcore_cli("export")
    assert result.exit_code == 1
    assert "ref.json: not a published ref" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_folder_at_the_cache_path_warns_and_exits_0(hostcore_cli, root, tmp_path):
    (root / "cache" / "refs.json").mkdir(parents=True)
    result = hostcore_cli("export")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("exported 5 row(s)")
    assert "the ref cache could not be written" in result.stderr
    assert export_status(hostcore_cli)["ref_cache"].startswith("not kept")
