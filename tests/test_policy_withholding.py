"""Withholding: each input stops rows at the seam on the next read; the class list
decides by the longest entry on path boundaries; broken state withholds."""

from __future__ import annotations

import pytest

from hostcore.evidence.inputs import ClassList, IgnoreDotfiles, PolicyStateError, SyncOptOut
from hostcore.evidence.policy import Policy
from hostcore.evidence.store import EvidenceRow
from hostcore.plugin.markers import hookimpl


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def exported_dirs(host) -> list[str]:
    return [r[1] for r in host.seam.read_rows_since_sync(None, 0, ["directory"])]


def seed(host, tmp_path) -> tuple[str, str]:
    repo, other = str(tmp_path / "work" / "repo"), str(tmp_path / "work" / "other")
    host.store.append([
        EvidenceRow(partition="p", source_id="claude-code", directory=repo),
        EvidenceRow(partition="p", source_id="codex", directory=other),
    ])
    return repo, other


def test_a_directory_marked_local_only_stops_its_rows_on_the_next_read(make_host, tmp_path):
    host = make_host()
    repo, other = seed(host, tmp_path)
    assert exported_dirs(host) == [repo, other]
    host.policy.input("class-list").set(repo, "local-only")
    assert exported_dirs(host) == [other]
    host.policy.input("class-list").set(repo, "full")
    assert exported_dirs(host) == [repo, other]


def test_an_opted_out_source_stops_its_rows_on_the_next_read(make_host, tmp_path):
    host = make_host()
    repo, _ = seed(host, tmp_path)
    host.policy.input("sync-opt-out").set("codex", True)
    assert exported_dirs(host) == [repo]


def test_a_dotfile_stops_rows_below_it_after_its_ttl(tmp_path, make_host):
    clock = Clock()
    dotfiles = IgnoreDotfiles(ttl=60, clock=clock)

    host = make_host()
    _, other = seed(host, tmp_path)
    (tmp_path / "work" / "repo").mkdir(parents=True)
    from hostcore.evidence.seam import ExportSeam

    seam = ExportSeam(host.store, Policy([dotfiles]))
    assert len(list(seam.read_rows_since_sync(None, 0, []))) == 2
    (tmp_path / "work" / "repo" / ".hostcoreignore").touch()
    assert len(list(seam.read_rows_since_sync(None, 0, []))) == 2  # cached verdict
    clock.now += 60
    assert [r[1] for r in seam.read_rows_since_sync(None, 0, ["directory"])] == [other]


def test_a_dotfile_in_an_ancestor_covers_every_directory_below(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "a" / ".hostcoreignore").write_text("")
    dotfiles = IgnoreDotfiles(ttl=0)
    assert dotfiles.withholds(str(deep), "x")
    assert dotfiles.withholds(str(tmp_path / "a"), "x")
    assert not dotfiles.withholds(str(tmp_path), "x")
    assert not dotfiles.withholds("", "x")
    assert not dotfiles.withholds(r"C:\Users\me\repo", "x")


def test_the_longest_entry_on_path_boundaries_decides(tmp_path):
    class_list = ClassList(tmp_path / "classes.tsv")
    class_list.set("/w", "local-only")
    class_list.set("/w/public", "full")
    class_list.set("/w/public/secrets", "local-only")
    assert class_list.withholds("/w", "s")
    assert class_list.withholds("/w/private", "s")
    assert not class_list.withholds("/w/public", "s")
    assert not class_list.withholds("/w/public/docs", "s")
    assert class_list.withholds("/w/public/secrets/x", "s")
    assert class_list.class_of("/w/publicity") == "local-only"   # under /w, not /w/public
    assert class_list.class_of("/wx") is None
    assert not class_list.withholds("", "s")


def test_windows_paths_match_without_case_and_with_either_separator(tmp_path):
    class_list = ClassList(tmp_path / "classes.tsv")
    class_list.set(r"C:\Users\Me\Secret", "local-only")
    assert class_list.withholds(r"c:\users\me\secret\repo", "s")
    assert class_list.withholds("C:/Users/Me/Secret/", "s")
    assert not class_list.withholds(r"C:\Users\Me\Secretive", "s")
    assert not class_list.withholds("/Users/Me/Secret", "s")


def test_the_class_list_file_is_canonical_and_readable(tmp_path):
    class_list = ClassList(tmp_path / "classes.tsv")
    class_list.set("/b", "full")
    class_list.set("/a", "local-only")
    class_list.set("/b", "local-only")
    body = [line for line in class_list.path.read_text().splitlines()
            if not line.startswith("#")]
    assert body == ["local-only\t/a", "local-only\t/b"]
    assert class_list.entries() == [("/a", "local-only"), ("/b", "local-only")]


def test_a_malformed_class_list_withholds_everything_and_says_why(tmp_path):
    path = tmp_path / "classes.tsv"
    path.write_text("local-only\t/a\nprivate /b\n")
    class_list = ClassList(path)
    assert class_list.withholds("/anything", "s")
    assert "classes.tsv:2" in class_list.status()["error"]
    with pytest.raises(PolicyStateError, match=r"classes\.tsv:2"):
        class_list.entries()
    path.write_text("local-only\t/a\n")
    class_list.fingerprint_part()
    assert not class_list.withholds("/anything", "s")


def test_a_malformed_opt_out_set_withholds_everything_and_says_why(tmp_path):
    path = tmp_path / "opt-out.json"
    path.write_text('{"not": "a list"}')
    opt_out = SyncOptOut(path)
    assert opt_out.withholds("/d", "anything")
    assert "expected a JSON list" in opt_out.status()["error"]
    with pytest.raises(PolicyStateError):
        opt_out.ids()


def test_an_input_that_raises_withholds(tmp_path):
    class Broken:
        name = "broken"

        def withholds(self, directory, source_id):
            raise RuntimeError("boom")

        def fingerprint_part(self):
            raise RuntimeError("boom")

    policy = Policy([Broken()])
    assert policy.withholds("/d", "s")
    assert policy.fingerprint() == Policy([Broken()]).fingerprint()
    assert policy.input_errors >= 2


def test_verdicts_are_asked_once_per_scope_not_per_row(make_host, tmp_path):
    calls = []

    class Counting:
        name = "counting"

        def withholds(self, directory, source_id):
            calls.append((directory, source_id))
            return False

        def fingerprint_part(self):
            return "fixed"

    class Plugin:
        @hookimpl
        def hostcore_policy_inputs(self, host):
            return Counting()

    host = make_host(Plugin())
    host.store.append([EvidenceRow(partition="p", source_id="s", directory=f"/d{i % 2}")
                       for i in range(100)])
    assert len(list(host.seam.read_rows_since_sync(None, 0, ["key"]))) == 100
    assert sorted(calls) == [("/d0", "s"), ("/d1", "s")]
    list(host.seam.read_rows_since_sync(None, 0, ["key"]))
    assert len(calls) == 2  # cached while the fingerprint is unchanged
