"""The store's tuple summary and ``ExportSeam.read_tuples_since_sync``: the distinct
(directory, source, git_remote) of a partition's rows, kept as rows are appended and
purged, and let out under the same per-scope verdicts as the rows themselves."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcore.evidence.inputs import ClassList, SyncOptOut
from hostcore.evidence.policy import Policy
from hostcore.evidence.seam import ExportSeam, SeamError
from hostcore.evidence.store import EvidenceRow, Store

COLUMNS = ["directory", "source_id", "git_remote"]


def row(partition="p", directory="/w/a", source="claude", remote="git@github.com:o/r.git",
        key=None):
    return EvidenceRow(partition=partition, source_id=source, directory=directory,
                       git_remote=remote, key=key)


@pytest.fixture
def kernel(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    classes = ClassList(tmp_path / "classes.tsv")
    opt_out = SyncOptOut(tmp_path / "opt-out.json")
    seam = ExportSeam(store, Policy([classes, opt_out]))
    yield store, seam, classes, opt_out
    store.close()


def tuples(seam, partition="p", cursor=0):
    return list(seam.read_tuples_since_sync(partition, cursor, COLUMNS))


def counts(store):
    db = sqlite3.connect(store.path)
    try:
        return sorted(db.execute("SELECT git_remote, rows FROM tuples"))
    finally:
        db.close()


def test_each_distinct_tuple_appears_once_in_first_appearance_order(kernel):
    store, seam, _, _ = kernel
    store.append([row(remote="r1"), row(remote="r1"), row(remote="r2"),
                  row(directory="/w/b", remote="r1"), row(source="codex", remote="r1")])
    store.append([row(remote="r1"), row(remote="r3")])
    found = tuples(seam)
    assert [t[1:] for t in found] == [("/w/a", "claude", "r1"), ("/w/a", "claude", "r2"),
                                      ("/w/b", "claude", "r1"), ("/w/a", "codex", "r1"),
                                      ("/w/a", "claude", "r3")]
    ids = [t[0] for t in found]
    assert ids == sorted(ids)
    assert [t[1:] for t in tuples(seam, cursor=ids[2])] == [("/w/a", "codex", "r1"),
                                                            ("/w/a", "claude", "r3")]


def test_tuples_are_per_partition_and_duplicate_keys_do_not_count(kernel):
    store, seam, _, _ = kernel
    store.append([row(remote="r1", key="e1"), row(remote="r1", key="e1"),
                  row(partition="q", remote="r9")])
    assert [t[3] for t in tuples(seam)] == ["r1"]
    assert [t[3] for t in tuples(seam, "q")] == ["r9"]
    assert len(tuples(seam, None)) == 2
    assert counts(store) == [("r1", 1), ("r9", 1)]


def test_withheld_scopes_keep_their_tuples_back(kernel):
    store, seam, classes, opt_out = kernel
    store.append([row(directory="/w/secret", remote="hidden"), row(remote="open"),
                  row(source="private", remote="opted")])
    classes.set("/w/secret", "local-only")
    opt_out.set("private", True)
    assert [t[3] for t in tuples(seam)] == ["open"]
    classes.set("/w/secret", "full")
    assert [t[3] for t in tuples(seam)] == ["hidden", "open"]


def test_a_purge_removes_exactly_the_tuples_left_without_rows(kernel):
    store, seam, _, _ = kernel
    store.append([row(directory="/w/a", remote="r1"), row(directory="/w/a", remote="r2"),
                  row(directory="/w/b", remote="r2"), row(directory="/w/b", remote="r2")])
    store.purge(directory="/w/b")
    assert [t[1:] for t in tuples(seam)] == [("/w/a", "claude", "r1"), ("/w/a", "claude", "r2")]
    store.purge(directory="/w/a", dry_run=True)
    assert len(tuples(seam)) == 2
    assert counts(store) == [("r1", 1), ("r2", 1)]


def test_dropping_a_partition_drops_its_tuples(kernel):
    store, seam, _, _ = kernel
    store.append([row(remote="r1"), row(partition="q", remote="r2")])
    store.drop_partition("p")
    assert tuples(seam) == []
    assert counts(store) == [("r2", 1)]


def test_a_store_written_before_the_summary_derives_it_once_on_open(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.append([row(remote="r1"), row(remote="r1"), row(directory="/w/b", remote="r2")])
    store.close()
    db = sqlite3.connect(tmp_path / "store.sqlite3")
    db.execute("DROP TABLE tuples")
    db.execute("DELETE FROM meta WHERE key = 'tuples'")
    db.commit()
    db.close()
    store = Store(tmp_path / "store.sqlite3")
    assert counts(store) == [("r1", 2), ("r2", 1)]
    store.close()


def test_unknown_tuple_columns_are_refused(kernel):
    _, seam, _, _ = kernel
    with pytest.raises(SeamError, match="payload"):
        seam.read_tuples_since_sync("p", 0, ["payload"])


ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(
        st.sampled_from(["p", "q"]), st.sampled_from(["/w/a", "/w/b", "/v"]),
        st.sampled_from(["s1", "s2"]), st.sampled_from(["", "r1", "r2", "r3"])), max_size=6)),
    st.tuples(st.just("purge"), st.sampled_from(["/w", "/w/a", "/v"])),
    st.tuples(st.just("withhold"), st.sampled_from(["/w/a", "/w/b", "/v"])),
    st.tuples(st.just("drop"), st.sampled_from(["p", "q"])),
), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_tuples_equal_the_distinct_values_of_the_permitted_rows(steps):
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store.sqlite3")
        classes = ClassList(Path(tmp) / "classes.tsv")
        seam = ExportSeam(store, Policy([classes]))
        for op, arg in steps:
            if op == "append":
                store.append([row(partition=p, directory=d, source=s, remote=r)
                              for p, d, s, r in arg])
            elif op == "purge":
                store.purge(directory=arg)
            elif op == "withhold":
                classes.set(arg, "local-only")
            else:
                store.drop_partition(arg)
            for partition in ("p", "q"):
                from_rows = {r[1:] for r in seam.read_rows_since_sync(partition, 0, COLUMNS)}
                from_tuples = [t[1:] for t in seam.read_tuples_since_sync(partition, 0, COLUMNS)]
                assert len(from_tuples) == len(set(from_tuples))
                assert set(from_tuples) == from_rows
        store.close()
