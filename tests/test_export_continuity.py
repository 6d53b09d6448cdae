"""A destination that is deleted, restored or re-pointed never costs a row or a wrong answer.

In one process, against the real directory destination: the exporter checks
before every push that the folder is the instance, at the position, it resumed
from, resumes from the folder's own position when it is not, and republishes
governance; with no ref cache it reads what the folder publishes and never
writes over a value it did not agree on.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import DestinationChanged
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import Exporter, ExportSummary, local_governance
from hostcore.export.refcache import CACHE_PATH
from hostcore.timestamps import utc_now

ROWS = 60
BATCH = 10


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    return tmp_path / "outbox"


def configured(make_host, outbox: Path, root: Path | None = None):
    return make_host(directory_plugin, root=root,
                     config={"plugins": {"directory-destination": {"path": str(outbox)}}})


@pytest.fixture
def host(make_host, outbox):
    host = configured(make_host, outbox)
    add_rows(host, ROWS)
    return host


def add_rows(host, count: int) -> None:
    host.store.append(EvidenceRow(partition="sessions", source_id="claude", directory="/work/a",
                                  payload={"n": i}) for i in range(count))


def held(host, outbox: Path) -> list[int]:
    return [r.position for r in DirectoryDestination(outbox).read_rows(
        "main", host.store.instance_id)]


def published_identities(host, outbox: Path) -> dict[str, str]:
    path = outbox / "main" / host.store.instance_id / "ref.json"
    return json.loads(path.read_text())


def exporter(host) -> Exporter:
    return Exporter(host, select_destination(host), batch_rows=BATCH)


def move_context(host, outbox: Path, value: str = "f" * 64) -> None:
    """Another writer publishes a different context for this host's store."""
    path = outbox / "main" / host.store.instance_id / "ref.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "context": value}))


def test_a_folder_deleted_between_runs_is_refilled_and_its_governance_republished(
        host, outbox):
    exporter(host).run()
    shutil.rmtree(outbox)
    report = exporter(host).report()
    assert (report.position, report.rows_behind) == (0, ROWS)
    summary = exporter(host).run()
    assert (summary.rows, summary.carried, summary.conflicts) == (
        ROWS, ["context", "terms", "decisions"], [])
    assert held(host, outbox) == list(range(1, ROWS + 1))
    assert published_identities(host, outbox) == local_governance(host).governance()
    # The next policy change is an ordinary write, not "expected X, found (none)".
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    assert exporter(host).run().carried == ["context"]


def test_a_folder_deleted_during_a_run_is_refilled_from_its_own_position(host, outbox):
    def delete_after_the_second_push(summary: ExportSummary) -> None:
        if summary.batches == 3 and summary.resumed == 0:  # governance + two of rows
            shutil.rmtree(outbox)

    summary = exporter(host).run(progress=delete_after_the_second_push)
    assert (summary.resumed, summary.done, summary.position) == (1, True, ROWS)
    assert held(host, outbox) == list(range(1, ROWS + 1))  # no gap, nothing twice
    assert published_identities(host, outbox) == local_governance(host).governance()
    report = exporter(host).report()
    assert (report.position, report.rows_behind) == (ROWS, 0)
    assert report.governance.current()


def test_a_backup_restored_during_a_run_is_resumed_from_its_position(host, outbox, tmp_path):
    backup = tmp_path / "backup"

    def back_up_then_restore(summary: ExportSummary) -> None:
        if summary.resumed:
            return
        if summary.batches == 3:
            shutil.copytree(outbox, backup)
        elif summary.batches == 5:
            shutil.rmtree(outbox)
            backup.rename(outbox)  # same instance id, older position

    summary = exporter(host).run(progress=back_up_then_restore)
    assert (summary.resumed, summary.done) == (1, True)
    assert held(host, outbox) == list(range(1, ROWS + 1))


def test_a_destination_replaced_at_every_push_is_given_up_on(host, outbox):
    def delete_every_time(summary: ExportSummary) -> None:
        shutil.rmtree(outbox, ignore_errors=True)

    runner = Exporter(host, select_destination(host), batch_rows=BATCH, max_resumes=2)
    with pytest.raises(DestinationChanged):
        runner.run(progress=delete_every_time)
    # The failed run set a back-off; once it has passed, a quiet destination is then
    # exported to the end.
    later = Exporter(host, select_destination(host), batch_rows=BATCH,
                     clock=lambda: utc_now() + timedelta(hours=1))
    assert later.run().done
    assert held(host, outbox) == list(range(1, ROWS + 1))


def test_a_deleted_cache_costs_one_negotiation_and_no_conflict(host, outbox):
    exporter(host).run()
    (host.root / CACHE_PATH).unlink()
    again = exporter(host).run()
    assert (again.carried, again.conflicts) == ([], [])  # it already holds this host's values
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    assert exporter(host).run().carried == ["context"]


def test_with_no_cache_another_value_at_the_destination_is_a_conflict_not_an_overwrite(
        host, outbox):
    exporter(host).run()
    before = published_identities(host, outbox)
    (host.root / CACHE_PATH).unlink()
    host.policy.input("class-list").set("/work/elsewhere", "local-only")
    add_rows(host, 5)
    summary = exporter(host).run()
    assert [c.component for c in summary.conflicts] == ["context"]
    assert summary.rows == 5
    assert published_identities(host, outbox) == before


def test_re_pointing_away_and_back_never_overwrites_another_writers_value(
        make_host, host, outbox, tmp_path):
    exporter(host).run()
    move_context(host, outbox)  # another writer, while this host looks elsewhere
    elsewhere = configured(make_host, tmp_path / "elsewhere", root=host.root)
    assert exporter(elsewhere).run().rows == ROWS
    back = configured(make_host, outbox, root=host.root)
    summary = exporter(back).run()
    assert [(c.component, c.found) for c in summary.conflicts] == [("context", "f" * 64)]
    assert published_identities(back, outbox)["context"] == "f" * 64


def test_a_first_contact_with_a_governed_destination_does_not_overwrite(host, outbox):
    origin_dir = outbox / "main" / host.store.instance_id
    origin_dir.mkdir(parents=True)
    (origin_dir / "ref.json").write_text(json.dumps({"terms": "e" * 64}))
    summary = exporter(host).run()
    assert [(c.component, c.found) for c in summary.conflicts] == [("terms", "e" * 64)]
    assert summary.carried == ["context", "decisions"]  # the rest is written, create-only
    assert summary.rows == ROWS
    assert published_identities(host, outbox)["terms"] == "e" * 64


def test_destination_changed_pickles_with_what_it_found():
    import pickle

    changed = pickle.loads(pickle.dumps(DestinationChanged("inst-a", "inst-b", 40, 12)))
    assert (changed.expected, changed.found, changed.after, changed.held) == (
        "inst-a", "inst-b", 40, 12)
    assert "another instance" in str(changed)
    assert "removed during the push" in str(DestinationChanged("inst-a", "", 40, -1))
