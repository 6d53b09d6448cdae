"""What the real ``gh`` lists of an item's kind and labels reaches the ledger, and only it.

``hostcore poll --once`` (the gh provider, the real ``gh`` binary, the fake GitHub
on 127.0.0.1): GitHub's issues listing marks a pull request with ``pull_request``
and names each label; the ledger keeps both on the record and in its index, a
relabelled item's labels follow on the next listing, and a label name, like a
title, appears in no log line and no file outside the ledger.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hostcore.testing import require_tool
from hostcore.workitems.ledger import Ledger

LISTING = ("/repos/o/r/issues?state=open&per_page=100&sort=updated&direction=desc"
           "&labels=agent&page=1")
SECRET_LABEL = "label-nobody-may-log"


def issue(number: int, updated: str, *labels: str, pull: bool = False) -> dict[str, object]:
    return {"number": number, "title": f"title {number}", "updated_at": updated,
            "labels": [{"name": name} for name in labels],
            **({"pull_request": {"url": f"https://example.test/pulls/{number}"}} if pull
               else {})}


def poll_once(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "hostcore", "-vv", "poll", "--once"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done


def kept(root: Path) -> dict[str, tuple[str, list[str]]]:
    ledger = Ledger(root / "ledger", read_only=True)
    try:
        return {ref: (record.poll.kind, record.poll.labels)
                for ref, record in ledger.iter_records() if record.poll is not None}
    finally:
        ledger.close()


def test_the_ledger_keeps_what_gh_lists_of_kind_and_labels_and_logs_no_label(
        fake_github, tmp_path):
    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["o/r"]\nlabels = ["agent"]\n')
    env = {**os.environ, **fake_github.env(), "HOSTCORE_ROOT": str(root),
           "HOSTCORE_LOAD_PLUGINS": "hostcore-gh"}
    fake_github.route(LISTING, 200, [
        issue(1, "2026-11-01T00:00:00Z", "agent", SECRET_LABEL),
        issue(2, "2026-11-02T00:00:00Z", "agent", pull=True)])
    fake_github.route(LISTING, 200, [  # #1 relabelled since: GitHub moved its updated_at
        issue(1, "2026-11-03T00:00:00Z", "agent"),
        issue(2, "2026-11-02T00:00:00Z", "agent", pull=True)])

    first = poll_once(root, env)
    assert kept(root) == {"o/r#1": ("issue", ["agent", SECRET_LABEL]),
                          "o/r#2": ("pull_request", ["agent"])}
    ledger = Ledger(root / "ledger", read_only=True)
    indexed = ledger.index.read(lambda db: dict(db.execute("SELECT ref, kind FROM entries")))
    ledger.close()
    assert indexed == {"o/r#1": "issue", "o/r#2": "pull_request"}

    second = poll_once(root, env)
    assert kept(root)["o/r#1"] == ("issue", ["agent"])
    for done in (first, second):
        assert SECRET_LABEL not in done.stdout + done.stderr
    outside = [path for path in root.rglob("*") if path.is_file()
               and path.relative_to(root).parts[0] != "ledger"
               and SECRET_LABEL.encode() in path.read_bytes()]
    assert outside == []
