"""What keeps ``hostcore check`` cheap over many targets, pinned by structure, never by
the clock: the stamps of many targets come back in a fixed number of statements,
and a folder that adds nothing to its parent's governance shares its parent's, so
the gate compares each distinct governance once."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hostcore.governance import stamp_targets
from hostcore.governance.inputs import Resolver
from hostcore.governance.stamps import Stamps
from hostcore.host import Host

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

FOLDERS = 120
PER_FOLDER = 10


def planted(tmp_path: Path) -> tuple[helpers.Repo, list[Path]]:
    repo = helpers.Repo(tmp_path)
    repo.write("CLAUDE.md", "use tabs\n")
    targets = []
    for n in range(FOLDERS):
        if n % 10 == 0:  # one folder in ten has rules of its own
            repo.write(f"pkg{n}/CLAUDE.md", f"rules of pkg{n}\n")
        targets.extend(repo.write(f"pkg{n}/m{f}.py", "pass\n") for f in range(PER_FOLDER))
    return repo, targets


def statements_of(store: Stamps) -> list[str]:
    db = store._connect()
    assert db is not None
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    return seen


def test_the_stamps_of_a_repository_come_back_in_two_statements(tmp_path):
    repo, targets = planted(tmp_path)
    with Host(root=repo.root, load_entrypoints=False, env={}) as host:
        stamp_targets(host, targets)
    store = Stamps(repo.root, read_only=True)
    try:
        seen = statements_of(store)
        entries = store.in_repository(str(repo.top))
    finally:
        store.close()
    assert len(entries) == FOLDERS * PER_FOLDER
    # One read of the targets' rows and one of the few governances they name.
    assert len(seen) == 2


def test_the_stamps_of_many_named_targets_come_back_in_a_statement_per_chunk(tmp_path):
    repo, targets = planted(tmp_path)
    with Host(root=repo.root, load_entrypoints=False, env={}) as host:
        stamp_targets(host, targets)
    store = Stamps(repo.root, read_only=True)
    try:
        seen = statements_of(store)
        entries = store.entries(str(t) for t in targets)
    finally:
        store.close()
    assert sorted(entries) == sorted(str(t) for t in targets)
    # 1,200 paths: two chunks of rows and one read of the governances, not 1,200 reads.
    assert len(seen) == 3


def test_a_folder_without_rules_of_its_own_shares_its_parents_governance(tmp_path):
    repo, _ = planted(tmp_path)
    top = str(repo.top)
    with Host(root=repo.root, load_entrypoints=False, env={}) as host:
        resolver = Resolver(host)
        plain, ruled = (resolver.at(os.path.join(top, f"pkg{n}"), top) for n in (1, 10))
        root = resolver.at(top, top)
    assert plain is root
    assert ruled is not root
    assert ruled.for_item(None).identities["context"] != \
        root.for_item(None).identities["context"]


def test_sharing_a_parents_governance_still_sees_a_rule_added_below(tmp_path):
    repo, targets = planted(tmp_path)
    a = targets[PER_FOLDER + 1]  # in pkg1, which has no rules of its own
    with Host(root=repo.root, load_entrypoints=False, env={}) as host:
        stamp_targets(host, [a])
    repo.write("pkg1/CLAUDE.md", "rules of pkg1, new\n")
    assert repo.check("pkg1/m1.py") == (1, [{"path": str(a), "status": "stale",
                                            "moved": ["context"]}])
