"""Shared fixtures for the host's own tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hostcore.files import file_lock
from hostcore.plugin.markers import hookimpl
from hostcore.workitems.items import Closure, Listing, ScopeListing, WorkItem, WorkItemRef


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

FAILING_PLUGIN = """
    from hostcore import hookimpl

    class Boom:
        name = "boom"

        def run(self, host):
            raise RuntimeError("the boom worker fails")

    @hookimpl
    def hostcore_workers(host):
        return Boom()
"""


@pytest.fixture
def plugin_sources() -> Callable[[str], str]:
    """Sources of ready-made plugins: ``good`` (a worker named hello), ``broken`` (raises
    on import) and ``failing`` (a worker named boom that raises every tick)."""
    return {"good": GOOD_PLUGIN, "broken": BROKEN_PLUGIN, "failing": FAILING_PLUGIN}.__getitem__


class OneItem:
    """A work-item provider listing one open item, ``o/r#1``; ``before_listing``, when
    given, runs at the start of each listing (to raise, exit or hang there)."""

    name = "one"

    def __init__(self, before_listing: Callable[[], object] | None = None) -> None:
        self._before_listing = before_listing

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("o/r#")

    def scope_of(self, ref: WorkItemRef) -> str:
        return "o/r"

    def list_items(self) -> Listing:
        if self._before_listing is not None:
            self._before_listing()
        item = WorkItem(ref=WorkItemRef("o/r#1"), updated_at="u")
        return Listing((ScopeListing(scope="o/r", status="complete", items=(item,)),))

    def closure(self, ref: WorkItemRef) -> Closure:
        return Closure(state="open")

    @hookimpl
    def hostcore_providers(self, host: Any) -> Any:
        return self


@pytest.fixture
def one_item_provider() -> type[OneItem]:
    """:class:`OneItem`, to make one with or without a ``before_listing``."""
    return OneItem


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


def write_plugin_project(folder: Path, dist: str, plugin: str, *, ep_name: str | None = None,
                         version: str = "1.0.0", requirement: str = "hostcore>=0.2") -> Path:
    """A buildable plugin project in ``folder``: distribution ``dist``, one entry point
    (named ``ep_name``, default ``dist``) on the module whose source is ``plugin``."""
    package = dist.replace("-", "_")
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text("")
    (folder / package / "plugin.py").write_text(plugin)
    (folder / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling>=1.27"]
        build-backend = "hatchling.build"

        [project]
        name = "{dist}"
        version = "{version}"
        dependencies = ["{requirement}"]

        [project.entry-points.hostcore]
        {ep_name or dist} = "{package}.plugin"

        [tool.hatch.build.targets.wheel]
        packages = ["{package}"]
        """))
    return folder


def make_outer_venv(folder: Path) -> Path:
    """A venv at ``folder`` (no pip) that also sees this interpreter's site-packages, so
    hostcore and pytest import there without a download; returns its python."""
    import site

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "_outer_environment.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in outer) + "\n")
    return python


@pytest.fixture(scope="session")
def plugin_project() -> Callable[..., Path]:
    """:func:`write_plugin_project`, for tests (module fixtures too) that build plugins."""
    return write_plugin_project


@pytest.fixture(scope="session")
def outer_venv() -> Callable[[Path], Path]:
    """:func:`make_outer_venv`, for tests that install into a fresh venv."""
    return make_outer_venv


@pytest.fixture
def export_root(tmp_path: Path) -> Callable[..., Path]:
    """Make a state root exporting to ``<tmp_path>/outbox`` (the directory destination)
    holding ``rows``; ``then(host)`` runs before the host closes (a policy, say)."""

    def make(rows: Iterable[Any], then: Callable[[Any], None] | None = None) -> Path:
        import hostcore_directory_destination.plugin as directory_plugin

        from hostcore.host import Host

        root = tmp_path / "root"
        root.mkdir()
        (root / "hostcore.toml").write_text(
            f'[plugins.directory-destination]\npath = "{tmp_path / "outbox"}"\n')
        host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
        try:
            host.store.append(rows)
            if then is not None:
                then(host)
        finally:
            host.close()
        return root

    return make


@pytest.fixture(scope="session")
def mount_namespace() -> list[str]:
    """The ``unshare`` command prefix that runs a command in a mount namespace of its
    own (to mount a tiny tmpfs); skips, or fails where CI requires ``unshare``,
    when the tool is missing or a namespace is not permitted here."""
    from hostcore.testing import require_tool

    tool = shutil.which("unshare")
    prefix = [tool or "unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    works = tool is not None and subprocess.run(
        [*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    require_tool("unshare", "util-linux, with permission to create a mount namespace",
                 found=works)
    return prefix
