"""``hostcore capture status|ignore|revalidate``."""

from __future__ import annotations

import json

import msgspec
import pytest
from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

from hostcore.evidence.inputs import CLASS_LIST_FILE, ClassList


@pytest.fixture
def root(tmp_path):
    return tmp_path / "cli-root"


@pytest.fixture
def options():
    """The worker's options: passes by rows, two positions a tick."""
    return {"row_budget": 2, "unit": "rows"}


@pytest.fixture
def cli(root, register_plugin, capture_plugin, make_host, evidence, hostcore_cli, clock,
        options):
    """Run the CLI on a root holding evidence of five repositories (six rows)."""
    register_plugin(capture_plugin(clock=clock, **options))
    host = make_host(root=root)
    evidence(host, "claude", [("/w/a", "claude", f"https://github.com/octo/r{i}")
                              for i in range(5)])
    evidence(host, "claude", [("/w/a", "claude", "https://gitlab.com/octo/elsewhere")])
    host.close()
    # One tick per `run --once`, so a pass can be seen under way.
    (root / "hostcore.toml").write_text("[run]\ndrain_seconds = 0\n")

    def run(*args):
        return hostcore_cli(*args, root=root)

    return run


def status(cli):
    done = cli("capture", "status", "--json")
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def test_status_reports_counts_before_anything_was_derived(cli):
    report = status(cli)
    assert report == {"inventory": 0, "capturing": 0, "ignored": 0, "revalidation": None,
                      "last_derivation_age_seconds": None, "pending": True,
                      "rate_limited_for_seconds": 0}


def test_status_shows_a_pass_under_way_as_counts(cli):
    assert cli("run", "--once").exit_code == 0
    report = status(cli)
    assert report["revalidation"] == {"trigger": "initial", "unit": "rows",
                                      "positions_read": 2, "positions_total": 6,
                                      "rows_read": 2, "tuples_read": 0, "confirmed": 2,
                                      "partitions_done": 0, "partitions_total": 1,
                                      "slices": 1}
    assert report["pending"] is True and report["capturing"] == 2
    text = cli("capture", "status")
    assert "revalidation: 2/6 positions, 2 rows read, 2 repositories confirmed" in text.stdout


def test_revalidate_runs_slices_with_a_progress_line_each(cli, clock):
    done = cli("capture", "revalidate")
    assert done.exit_code == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("revalidation:")]
    assert len(progress) == 6 // 2 - 1  # 6 positions, 2 a tick: the third completes
    assert "octo" not in done.stderr
    assert "(trigger: initial): 3 slice(s), 6 rows read, 5 repositories" in done.stdout
    clock.advance(10)
    report = status(cli)
    assert report["inventory"] == 5 and report["pending"] is False
    assert report["last_derivation_age_seconds"] == 10


def test_revalidate_starts_a_pass_even_when_no_trigger_is_due(cli):
    cli("capture", "revalidate")
    done = cli("capture", "revalidate", "--json")
    assert json.loads(done.stdout) == {"ticks": 3, "trigger": "requested", "rows_read": 6,
                                       "tuples_read": 0, "inventory": 5}


def test_revalidate_labels_the_pass_with_the_trigger_that_was_due(cli, root):
    cli("capture", "revalidate")
    ClassList(root / CLASS_LIST_FILE).set("/elsewhere", "local-only")  # a policy change
    done = cli("capture", "revalidate", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trigger"] == "fingerprint"
    assert all(line.endswith("(trigger: fingerprint)")
               for line in done.stderr.splitlines() if line.startswith("revalidation:"))
    assert status(cli)["pending"] is False


def test_status_shows_a_derivation_stamped_in_the_future_as_due(cli, root, clock):
    cli("capture", "revalidate")
    state = StateFile(root / "plugins" / "github-capture" / SIDECAR_FILE, SidecarState)
    state.save(msgspec.structs.replace(state.load(), derived_at=clock.now + 30 * 86400))
    report = status(cli)
    assert report["last_derivation_age_seconds"] == -30 * 86400
    assert report["pending"] is True
    text = cli("capture", "status").stdout
    assert f"last derivation: stamped {30 * 86400} s in the future" in text
    assert cli("run", "--once").exit_code == 0
    assert status(cli)["revalidation"]["trigger"] == "age"
    cli("capture", "revalidate")
    assert status(cli)["last_derivation_age_seconds"] == 0


@pytest.mark.parametrize("options", [{"row_budget": 2}])
def test_a_pass_reads_tuples_unless_configured_otherwise(cli):
    done = cli("capture", "revalidate", "--json")
    assert json.loads(done.stdout) == {"ticks": 1, "trigger": "initial", "rows_read": 0,
                                       "tuples_read": 6, "inventory": 5}


def test_ignore_adds_and_removes_a_repository(cli):
    cli("capture", "revalidate")
    assert cli("capture", "ignore", "Octo/R1").exit_code == 0
    assert cli("capture", "ignore", "git@github.com:octo/r2.git").exit_code == 0
    report = status(cli)
    assert (report["ignored"], report["capturing"], report["inventory"]) == (2, 3, 5)
    assert cli("capture", "ignore", "--remove", "octo/r1").exit_code == 0
    assert status(cli)["ignored"] == 1


def test_ignore_rejects_what_is_not_a_repository(cli):
    done = cli("capture", "ignore", "not-a-repo")
    assert done.exit_code == 2
    assert "not-a-repo" in done.stderr
    assert status(cli)["ignored"] == 0


def test_hostcore_status_includes_the_worker_counts(cli):
    cli("capture", "revalidate")
    done = cli("status", "--json")
    worker = json.loads(done.stdout)["components"]["worker"]["github-capture"]
    assert worker["inventory"] == 5 and worker["pending"] is False


def test_a_state_file_that_does_not_decode_is_named_and_left_alone(cli, tmp_path):
    state = tmp_path / "cli-root" / "plugins" / "github-capture" / "sidecar.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text('{"repos": "not a list"}')
    done = cli("capture", "status")
    assert done.exit_code == 1
    assert "sidecar.json" in done.stderr and "$.repos" in done.stderr
    tick = cli("run", "--once")
    assert tick.exit_code == 1
    assert state.read_text() == '{"repos": "not a list"}'


def test_ignore_refuses_a_repository_the_inventory_does_not_hold_unless_forced(cli):
    cli("capture", "revalidate")
    done = cli("capture", "ignore", "octo/typo")
    assert done.exit_code == 2
    assert "octo/typo" in done.stderr and "--force" in done.stderr
    assert status(cli)["ignored"] == 0
    forced = cli("capture", "ignore", "--force", "octo/typo", "--json")
    assert forced.exit_code == 0, forced.stderr
    assert json.loads(forced.stdout) == {"repository": "octo/typo", "ignored": True,
                                         "changed": True}
    assert status(cli)["ignored"] == 1


def test_ignore_json_reports_no_change_and_removing_what_is_not_ignored_is_refused(cli):
    cli("capture", "revalidate")
    assert cli("capture", "ignore", "octo/r1").exit_code == 0
    again = cli("capture", "ignore", "octo/r1", "--json")
    assert json.loads(again.stdout)["changed"] is False
    removed = cli("capture", "ignore", "--remove", "octo/r1", "--json")
    assert json.loads(removed.stdout) == {"repository": "octo/r1", "ignored": False,
                                          "changed": True}
    refused = cli("capture", "ignore", "--remove", "octo/r1")
    assert refused.exit_code == 2 and "not on the ignore list" in refused.stderr
