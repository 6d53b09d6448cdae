"""An ordinary tick's policy fingerprint costs what changed, not what the store names:
a long-running process watches the folders on its directories' paths and looks again
only where an entry came or went, and still sees a new or removed `.hostcoreignore`
on its next check."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hostcore.evidence.rows import EvidenceRow


def _host_over(make_host, work: Path, count: int):
    """A host whose store has one row in each of ``count`` real checkout folders,
    its dotfile input checking on every fingerprint (no TTL between ticks)."""
    host = make_host()
    rows = []
    for i in range(count):
        folder = work / f"owner-{i % 7}" / f"repo-{i}"
        folder.mkdir(parents=True)
        rows.append(EvidenceRow(partition="p", source_id="s", directory=str(folder),
                                key=f"k{i}"))
    host.store.append(rows)
    host.policy.input("ignore-dotfiles").ttl = 0
    return host


def _ticks(host, count: int = 3) -> str:
    """``count`` ordinary ticks' fingerprints; the last one."""
    part = ""
    for _ in range(count):
        part = host.seam.export_policy_fingerprint()
    return part


def _exported(host) -> set[str]:
    return {key for _, key in host.seam.read_rows_since_sync(None, 0, ["key"])}


@pytest.fixture
def lstat_calls(monkeypatch):
    """Counts ``os.lstat`` (what ``os.path.lexists`` and every dotfile look cost)."""
    calls = []
    real = os.lstat

    def counted(path, *args, **kwargs):
        calls.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counted)
    return calls


def test_a_new_dotfile_in_a_watched_folder_contracts_on_the_next_tick(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 20)
    before = _ticks(host)
    assert "k3" in _exported(host)
    (work / "owner-3" / "repo-3" / ".hostcoreignore").touch()
    moved = host.seam.export_policy_fingerprint()
    assert moved != before
    assert "k3" not in _exported(host)
    (work / "owner-3" / "repo-3" / ".hostcoreignore").unlink()
    assert host.seam.export_policy_fingerprint() == before
    assert "k3" in _exported(host)


def test_a_new_dotfile_in_a_shared_ancestor_withholds_every_folder_below(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 21)
    before = _ticks(host)
    (work / "owner-2" / ".hostcoreignore").write_text("")
    assert host.seam.export_policy_fingerprint() != before
    withheld = {f"k{i}" for i in range(21) if i % 7 == 2}
    assert _exported(host) == {f"k{i}" for i in range(21)} - withheld


def test_an_edited_dotfile_keeps_withholding(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 10)
    dotfile = work / "owner-1" / "repo-1" / ".hostcoreignore"
    dotfile.write_text("first\n")
    contracted = _ticks(host)
    assert "k1" not in _exported(host)
    with open(dotfile, "a") as handle:  # an edit in place
        handle.write("more\n")
    replacement = dotfile.with_name(".hostcoreignore.swp")
    replacement.write_text("saved by an editor\n")
    os.replace(replacement, dotfile)  # an editor's save: a new file renamed over it
    assert host.seam.export_policy_fingerprint() == contracted
    assert "k1" not in _exported(host)


def test_a_folder_moved_aside_and_made_again_with_a_dotfile_is_seen(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 10)
    before = _ticks(host)
    # Its watch followed the old folder: the new one at the same path is looked at.
    (work / "owner-4").rename(work / "owner-4.old")
    (work / "owner-4" / "repo-4").mkdir(parents=True)
    (work / "owner-4" / "repo-4" / ".hostcoreignore").touch()
    assert host.seam.export_policy_fingerprint() != before
    assert "k4" not in _exported(host)
    assert "k0" in _exported(host)


def test_a_deleted_checkout_made_again_with_a_dotfile_is_seen(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 10)
    shutil.rmtree(work / "owner-5")
    before = _ticks(host)
    (work / "owner-5" / "repo-5").mkdir(parents=True)
    (work / "owner-5" / "repo-5" / ".hostcoreignore").touch()
    assert host.seam.export_policy_fingerprint() != before
    assert "k5" not in _exported(host)


def test_a_fresh_process_agrees_with_a_watching_one(make_host, tmp_path):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 10)
    _ticks(host)
    (work / "owner-6" / ".hostcoreignore").touch()
    watched = host.seam.export_policy_fingerprint()
    fresh = make_host(root=host.root)
    assert fresh.seam.export_policy_fingerprint() == watched


def _lstats_per_tick(make_host, work: Path, count: int, lstat_calls: list) -> int:
    host = _host_over(make_host, work, count)
    _ticks(host)  # the first check looks at every folder, the second starts the watch
    lstat_calls.clear()
    _ticks(host, 5)
    return len(lstat_calls)


def test_an_ordinary_tick_looks_at_no_folder_however_many_directories(make_host, tmp_path,
                                                                      lstat_calls):
    few = _lstats_per_tick(make_host, tmp_path / "few", 50, lstat_calls)
    many = _lstats_per_tick(make_host, tmp_path / "many", 2_000, lstat_calls)
    assert few == many == 0


def test_a_tick_after_a_dotfile_appears_looks_at_its_folder_not_at_every_one(
        make_host, tmp_path, lstat_calls):
    work = tmp_path / "work"
    host = _host_over(make_host, work, 2_000)
    _ticks(host)
    (work / "owner-0" / "repo-7" / ".hostcoreignore").touch()
    lstat_calls.clear()
    host.seam.export_policy_fingerprint()
    looked_at = {os.path.dirname(os.fspath(p)) for p in lstat_calls}
    assert str(work / "owner-0" / "repo-7") in looked_at
    assert len(lstat_calls) < 10
