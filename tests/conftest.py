"""Shared fixtures for the host's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hostcore.files import file_lock


@dataclass
class FakeSite:
    """A folder on ``sys.path`` holding hand-made distributions (``.dist-info``).

    Each distribution's entry points in group ``hostcore`` point at modules written
    beside it. Module names get a random suffix so tests never share a cached import.
    """

    folder: Path
    modules: list[str] = field(default_factory=list)

    def add(self, dist: str, plugins: dict[str, str], version: str = "1.0") -> dict[str, str]:
        """Install ``dist`` with one entry point per ``{name: module source}``.

        Returns ``{entry point name: module name}``.
        """
        names: dict[str, str] = {}
        lines = ["[hostcore]"]
        for ep_name, source in plugins.items():
            module = f"fake_{ep_name.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
            (self.folder / f"{module}.py").write_text(textwrap.dedent(source))
            lines.append(f"{ep_name} = {module}")
            names[ep_name] = module
            self.modules.append(module)
        info = self.folder / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        )
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        return names


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSite]:
    """A :class:`FakeSite` on ``sys.path`` for this test only."""
    folder = tmp_path / "fake-site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    site = FakeSite(folder)
    yield site
    for module in site.modules:
        sys.modules.pop(module, None)


GOOD_PLUGIN = """
    from hostcore import hookimpl
    from hostcore.plugin.registration import WorkerResult

    class Hello:
        name = "hello"

        def run(self, host):
            return WorkerResult(counts={"greeted": 1})

    @hookimpl
    def hostcore_workers(host):
        return Hello()
"""

BROKEN_PLUGIN = """
    raise RuntimeError("the broken plugin cannot start")
"""


@pytest.fixture
def plugin_sources() -> Callable[[str], str]:
    """Sources of ready-made plugins: ``good`` (a worker named hello) and ``broken``."""
    return {"good": GOOD_PLUGIN, "broken": BROKEN_PLUGIN}.__getitem__


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This tree's offline wheelhouse (``scripts/build-dist``): built once per run.

    ``HOSTCORE_WHEELHOUSE`` names one already built (``scripts/test-wheels`` sets it,
    so the acceptance tests install the very wheels under test). Otherwise the first
    xdist worker to ask builds it into the run's shared temporary folder, under a
    lock, and the others reuse it.
    """
    given = os.environ.get("HOSTCORE_WHEELHOUSE")
    if given:
        return Path(given)
    # Under xdist each worker's basetemp sits in one folder per run; without it the
    # basetemp is that run's own folder (its parent outlives the run).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    target = shared / "wheelhouse"
    with file_lock(shared / "wheelhouse.lock"):
        if not (target / ".built").exists():
            result = subprocess.run([sys.executable, str(REPO / "scripts" / "build-dist"),
                                     "--out", str(target)],
                                    capture_output=True, text=True, timeout=1800)
            if result.returncode != 0:
                pytest.fail(f"scripts/build-dist failed:\n{result.stderr[-3000:]}")
            (target / ".built").write_text("")
    return target
