"""What the governance tests share: a git-shaped repository, a state root, and the real
``hostcore`` process run against them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


class Repo:
    """A git-shaped folder (``.git`` is all the gate looks for) and a state root."""

    def __init__(self, base: Path) -> None:
        self.top = base / "repo"
        self.root = base / "state"
        (self.top / ".git").mkdir(parents=True)

    def write(self, relative: str, text: str) -> Path:
        path = self.top / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def hostcore(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
        env["HOSTCORE_LOAD_PLUGINS"] = ""  # the built-ins only: no third party's inputs
        env["COLUMNS"] = "200"
        return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(self.root),
                               *args], cwd=cwd or self.top, env=env, capture_output=True,
                              text=True, timeout=120)

    def check(self, *paths: str, cwd: Path | None = None) -> tuple[int, list[dict[str, object]]]:
        done = self.hostcore("check", "--json", *paths, cwd=cwd)
        assert done.returncode in (0, 1), done.stderr
        return done.returncode, json.loads(done.stdout)["targets"]
