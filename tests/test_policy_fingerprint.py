"""The export policy fingerprint changes exactly when a fingerprinting input changes."""

from __future__ import annotations

import time

import pytest

from hostcore.evidence.inputs import ClassList, IgnoreDotfiles, SyncOptOut
from hostcore.evidence.policy import Policy
from hostcore.plugin.markers import hookimpl


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def parts(tmp_path):
    clock = Clock()
    class_list = ClassList(tmp_path / "policy" / "classes.tsv")
    opt_out = SyncOptOut(tmp_path / "policy" / "opt-out.json")
    dotfiles = IgnoreDotfiles(ttl=30, clock=clock)
    return class_list, opt_out, dotfiles, clock, Policy([class_list, opt_out, dotfiles])


def test_unchanged_inputs_give_the_same_fingerprint(parts):
    *_, policy = parts
    assert policy.fingerprint() == policy.fingerprint()


def test_a_class_list_change_changes_it_and_moving_back_restores_it(parts, tmp_path):
    class_list, *_, policy = parts
    class_list.set(str(tmp_path / "repo"), "full")
    original = policy.fingerprint()
    class_list.set(str(tmp_path / "repo"), "local-only")
    moved = policy.fingerprint()
    assert moved != original
    class_list.set(str(tmp_path / "repo"), "full")
    assert policy.fingerprint() == original


def test_the_class_list_part_is_the_sha256_of_the_file_bytes(parts, tmp_path):
    import hashlib

    class_list, *_ = parts
    class_list.set("/some/secret/path", "local-only")
    digest = hashlib.sha256(class_list.path.read_bytes()).hexdigest()
    assert class_list.fingerprint_part() == digest
    assert "secret" not in class_list.fingerprint_part()


def test_an_edit_by_another_process_is_seen_on_the_next_fingerprint(parts):
    class_list, *_, policy = parts
    before = policy.fingerprint()
    class_list.path.parent.mkdir(parents=True, exist_ok=True)
    class_list.path.write_text("local-only\t/elsewhere\n")
    assert policy.fingerprint() != before


def test_an_opt_out_changes_it_and_opting_back_in_restores_it(parts):
    _, opt_out, _, _, policy = parts
    original = policy.fingerprint()
    opt_out.set("codex", True)
    opted = policy.fingerprint()
    assert opted != original
    opt_out.set("codex", False)
    assert policy.fingerprint() == original


def test_the_opt_out_part_depends_on_the_set_not_the_order_written(parts):
    _, opt_out, _, clock, _ = parts
    opt_out.path.parent.mkdir(parents=True, exist_ok=True)
    opt_out.path.write_text('["b", "a"]')
    clock.now += 31
    first = opt_out.fingerprint_part()
    opt_out.path.write_text('[\n  "a",\n  "b"\n]\n')
    assert opt_out.fingerprint_part() == first


def test_an_opt_out_written_by_another_process_moves_the_next_fingerprint(parts):
    _, opt_out, *_, policy = parts
    before = policy.fingerprint()
    opt_out.path.parent.mkdir(parents=True, exist_ok=True)
    opt_out.path.write_text('["claude-code"]')  # another process opts out
    assert policy.fingerprint() != before     # no TTL: the file's stat changed
    assert opt_out.withholds("/any", "claude-code")


def test_an_unchanged_opt_out_file_is_not_read_again(parts, monkeypatch):
    _, opt_out, *_ = parts
    opt_out.fingerprint_part()
    monkeypatch.setattr(type(opt_out), "_load", lambda self: pytest.fail("re-read"))
    assert opt_out.fingerprint_part() == opt_out.fingerprint_part()


def test_a_new_dotfile_moves_the_fingerprint_within_its_ttl(parts, tmp_path):
    *_, dotfiles, clock, policy = parts
    (tmp_path / "repo").mkdir()
    assert not dotfiles.withholds(str(tmp_path / "repo"), "codex")
    before = policy.fingerprint()
    (tmp_path / ".hostcoreignore").touch()
    assert policy.fingerprint() == before      # within the TTL: folders not looked at
    clock.now += 30
    moved = policy.fingerprint()
    assert moved != before
    assert dotfiles.withholds(str(tmp_path / "repo"), "codex")
    assert str(tmp_path) not in dotfiles.fingerprint_part()
    (tmp_path / ".hostcoreignore").unlink()
    clock.now += 30
    assert policy.fingerprint() == before      # the same folders, the same verdicts


def test_a_third_party_input_plugs_in_through_the_hook(make_host, tmp_path):
    class Toggle:
        name = "toggle"
        state = "off"

        def withholds(self, directory, source_id):
            return self.state == "on"

        def fingerprint_part(self):
            return self.state

    toggle = Toggle()

    class Plugin:
        @hookimpl
        def hostcore_policy_inputs(self, host):
            return toggle

    host = make_host(Plugin())
    assert [i.name for i in host.policy.inputs] == [
        "class-list", "ignore-dotfiles", "sync-opt-out", "toggle"]
    before = host.seam.export_policy_fingerprint()
    toggle.state = "on"
    assert host.seam.export_policy_fingerprint() != before
    assert host.policy.withholds("/anywhere", "any")
    toggle.state = "off"
    assert host.seam.export_policy_fingerprint() == before


def test_an_input_without_a_part_does_not_change_it(make_host):
    class Volatile:
        name = "volatile"

        def withholds(self, directory, source_id):
            return False

        def fingerprint_part(self):
            return None

    class Plugin:
        @hookimpl
        def hostcore_policy_inputs(self, host):
            return Volatile()

    with_it = make_host(Plugin()).seam.export_policy_fingerprint()
    without = make_host().seam.export_policy_fingerprint()
    assert with_it == without


def test_fingerprint_is_cheap_with_an_unchanged_policy(parts, tmp_path):
    class_list, opt_out, *_, policy = parts
    for i in range(200):
        class_list.set(str(tmp_path / f"dir-{i}"), "local-only" if i % 2 else "full")
    opt_out.set("codex", True)
    policy.fingerprint()
    started = time.perf_counter()
    for _ in range(200):
        policy.fingerprint()
    assert (time.perf_counter() - started) / 200 < 0.001


def test_a_fresh_process_computes_the_dotfile_part_a_long_running_one_has(make_host, tmp_path):
    # Regression: the part covered only the folders this process had asked about,
    # so a fresh `hostcore export` published another context than a running
    # `hostcore run` had, with no policy change, and each flipped it back.
    from hostcore.evidence.rows import EvidenceRow

    work = tmp_path / "work"
    (work / "secret" / "deep").mkdir(parents=True)
    (work / "open").mkdir()
    (work / "secret" / ".hostcoreignore").write_text("")
    root = tmp_path / "root"
    running = make_host(root=root)
    running.store.append([
        EvidenceRow(partition="p", source_id="s", directory=str(work / "secret" / "deep"),
                    key="a"),
        EvidenceRow(partition="p", source_id="s", directory=str(work / "open"), key="b")])
    read = list(running.seam.read_rows_since_sync(None, 0, ["key"]))
    assert [key for _, key in read] == ["b"]  # the dotfile withholds its folder's rows
    long_running = running.seam.export_policy_fingerprint()
    fresh = make_host(root=root)
    assert fresh.seam.export_policy_fingerprint() == long_running
    (work / "secret" / ".hostcoreignore").unlink()
    assert make_host(root=root).seam.export_policy_fingerprint() != long_running
