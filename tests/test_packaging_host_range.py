"""A plugin states the hostcore versions it supports; the loader refuses one built for another.

The range is the plugin distribution's dependency on ``hostcore`` (its
``Requires-Dist``). The loader checks it before importing the plugin and reports a
plugin whose range excludes the running host with both versions named, instead of
letting it fail later in a confusing way; ``HOSTCORE_STRICT_PLUGINS=1`` makes that
fatal. The first tests build real plugin packages with hatchling and install them
with pip; the rest use hand-made ``.dist-info`` folders for the finer cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcore import Host, __version__
from hostcore.errors import PluginLoadError
from hostcore.plugin.loader import _packaging_verdicts, _plain_verdicts, host_range_check

MAJOR, MINOR = (int(part) for part in __version__.split(".")[:2])
# A range for a host one minor ahead: excludes the running host whatever its version.
FUTURE_RANGE = f">={MAJOR}.{MINOR + 1},<{MAJOR}.{MINOR + 2}"
CURRENT_RANGE = f">={MAJOR}.{MINOR},<{MAJOR}.{MINOR + 1}"

# If the loader imported a refused plugin, this error would be reported instead.
MUST_NOT_IMPORT = 'raise ImportError("the loader imported a plugin it should have refused")\n'

WORKER_PLUGIN = '''
from hostcore import hookimpl
from hostcore.plugin.registration import WorkerResult


class Hello:
    name = "hello-{suffix}"

    def run(self, host):
        return WorkerResult(counts={{"greeted": 1}})


@hookimpl
def hostcore_workers(host):
    return Hello()
'''


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, outer_venv: Callable[[Path], Path],
         plugin_project: Callable[..., Path]) -> Path:
    """A fresh venv seeing this environment's hostcore, with two plugins built and installed.

    ``acme-future`` states a range for the next hostcore minor; ``acme-current`` the
    running host's minor. Both are built into wheels by hatchling and installed by pip.
    """
    work = tmp_path_factory.mktemp("host-range")
    folder = work / "venv"
    python = outer_venv(folder)
    projects = [
        plugin_project(work / "future", "acme-future", MUST_NOT_IMPORT,
                       requirement=f"hostcore{FUTURE_RANGE}"),
        plugin_project(work / "current", "acme-current", WORKER_PLUGIN.format(suffix="current"),
                       requirement=f"hostcore{CURRENT_RANGE}"),
    ]
    wheels = work / "wheels"
    for project in projects:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "--disable-pip-version-check", "-w",
                        str(wheels), str(project)],
                       check=True, capture_output=True, timeout=300)
    # --no-deps: pip would rightly refuse acme-future's range; the point is what the
    # loader does when such a plugin is installed anyway (say, by an older pip or a copy).
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", "--disable-pip-version-check",
                    *map(str, sorted(wheels.glob("*.whl")))],
                   check=True, capture_output=True, timeout=300)
    return folder


def hostcore(venv: Path, root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "hostcore", "--root", str(root), *args],
        env={**clean, "HOSTCORE_LOAD_PLUGINS": "acme-future,acme-current", **env},
        capture_output=True, text=True, timeout=120)


def test_a_plugin_built_for_another_host_version_is_listed_failed_naming_both(venv, tmp_path):
    result = hostcore(venv, tmp_path, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    infos = {i["name"]: i for i in json.loads(result.stdout)}
    refused = infos["acme-future"]
    assert refused["status"] == "failed"
    assert refused["error"] == (
        f"PluginLoadError: built for hostcore {FUTURE_RANGE}; this is {__version__}")
    assert refused["requires_hostcore"] == FUTURE_RANGE
    assert refused["traceback"] is None
    fitting = infos["acme-current"]
    assert (fitting["status"], fitting["requires_hostcore"]) == ("loaded", CURRENT_RANGE)


def test_the_host_runs_without_the_refused_plugin(venv, tmp_path):
    result = hostcore(venv, tmp_path, "run", "--once", "--json")
    assert result.returncode == 0, result.stderr
    assert f"built for hostcore {FUTURE_RANGE}; this is {__version__}" in result.stderr
    steps = {s["name"]: s for s in json.loads(result.stdout.splitlines()[-1])["steps"]}
    assert steps["hello-current"]["ok"]


def test_strict_mode_makes_the_refusal_fatal(venv, tmp_path):
    result = hostcore(venv, tmp_path, "run", "--once", HOSTCORE_STRICT_PLUGINS="1")
    assert result.returncode == 1
    assert "'acme-future'" in result.stderr
    assert f"built for hostcore {FUTURE_RANGE}; this is {__version__}" in result.stderr
    assert "should have refused" not in result.stderr


# -- the finer cases, on hand-made distributions ---------------------------------------


@pytest.fixture
def dist_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install hand-made distributions whose METADATA carries the given Requires-Dist lines."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    modules: list[str] = []

    def add(dist: str, requires: list[str], source: str = "", entry_points: int = 1) -> str:
        """Install ``dist``; entry points ``dist``, ``dist-1``, ...; the first one's module."""
        eps = []
        for n in range(entry_points):
            module = f"range_{dist.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
            (folder / f"{module}.py").write_text(source)
            modules.append(module)
            eps.append(f"{dist}{'-' + str(n) if n else ''} = {module}\n")
        info = folder / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.4\nName: {dist}\nVersion: 1.0\n{lines}\n"
            "A long description that no header scan should read.\nName: not-a-header\n")
        (info / "entry_points.txt").write_text("[hostcore]\n" + "".join(eps))
        return modules[-entry_points]

    yield add
    for module in modules:
        sys.modules.pop(module, None)


def build(tmp_path: Path, names: str, **env: str) -> Host:
    return Host(root=tmp_path / "root", load_entrypoints=True,
                env={"HOSTCORE_LOAD_PLUGINS": names, **env})


def test_a_refused_plugin_is_never_imported(tmp_path, dist_site):
    module = dist_site("acme-old", ["hostcore>=0.0.1,<0.0.2"], MUST_NOT_IMPORT)
    info = build(tmp_path, "acme-old").plugins.infos["acme-old"]
    assert info.status == "failed"
    assert info.error == (
        f"PluginLoadError: built for hostcore >=0.0.1,<0.0.2; this is {__version__}")
    assert module not in sys.modules


def test_strict_mode_raises_naming_the_plugin_and_both_versions(tmp_path, dist_site):
    dist_site("acme-old", ["hostcore<0.0.2,>=0.0.1"], MUST_NOT_IMPORT)
    with pytest.raises(PluginLoadError) as caught:
        build(tmp_path, "acme-old", HOSTCORE_STRICT_PLUGINS="1")
    message = str(caught.value)
    assert "'acme-old' (acme-old 1.0)" in message
    # Lower bound first, however the metadata stored the clauses.
    assert f"built for hostcore >=0.0.1,<0.0.2; this is {__version__}" in message


@pytest.mark.parametrize(("requires", "stated"), [
    ([f"hostcore{CURRENT_RANGE}"], CURRENT_RANGE),
    ([], None),
    (["msgspec>=0.18"], None),
    # Only for an extra, or under a marker false here: states nothing for this install.
    (['hostcore<0.0.1; extra == "test"'], None),
    (['hostcore<0.0.1; python_version < "3"'], None),
    # Cannot be parsed: loaded rather than refused on doubt.
    (["hostcore>=>0.2"], None),
])
def test_a_plugin_whose_range_admits_the_host_or_states_none_loads(tmp_path, dist_site,
                                                                   requires, stated):
    dist_site("acme-fits", requires, "VALUE = 1\n")
    info = build(tmp_path, "acme-fits").plugins.infos["acme-fits"]
    assert (info.status, info.error, info.requires_hostcore) == ("loaded", None, stated)


def test_a_blocked_plugin_is_not_checked(tmp_path, dist_site):
    dist_site("acme-old", ["hostcore<0.0.2"], MUST_NOT_IMPORT)
    info = build(tmp_path, "").plugins.infos["acme-old"]
    assert (info.status, info.error, info.requires_hostcore) == ("blocked", None, None)


def test_metadata_is_read_once_per_distribution_without_the_email_parser(
        tmp_path, dist_site, monkeypatch):
    from hostcore.plugin import discovery

    dist_site("acme-twice", [f"hostcore{CURRENT_RANGE}"], "VALUE = 1\n", entry_points=2)
    reads: list[str] = []
    real_read = discovery.read_label

    def counting_read(info):
        if "acme_twice" in str(info):
            reads.append(info.name)
        return real_read(info)

    monkeypatch.setattr(discovery, "read_label", counting_read)
    infos = build(tmp_path, "acme-twice").plugins.infos
    assert {infos[n].status for n in ("acme-twice", "acme-twice-1")} == {"loaded"}
    assert len(reads) == 1
    # Neither the metadata package nor the email parser is on a cold start's path.
    script = ("import sys, hostcore.plugin.loader as l; from hostcore import Host; "
              f"Host(root={str(tmp_path / 'r2')!r}, env={{}}); "
              "print([m for m in ('importlib_metadata', 'importlib.metadata', 'email.parser')"
              " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "[]"


def packaging_modules_after_loading(tmp_path: Path, site_folder: Path, allow: str) -> dict:
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(site_folder)!r})\n"
        "from hostcore import Host\n"
        f"host = Host(root={str(tmp_path / 'root')!r},"
        f" env={{'HOSTCORE_LOAD_PLUGINS': {allow!r}}})\n"
        "infos = {n: [i.status, i.requires_hostcore] for n, i in host.plugins.infos.items()}\n"
        "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] == 'packaging'),"
        " infos]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=120)
    modules, infos = json.loads(out.stdout.splitlines()[-1])
    return {"modules": modules, "infos": infos}


def test_the_range_check_costs_nothing_when_no_plugin_is_loaded(tmp_path, dist_site):
    dist_site("acme-plain", [f"hostcore{CURRENT_RANGE}"], "VALUE = 1\n")
    seen = packaging_modules_after_loading(tmp_path, tmp_path / "site", "")
    assert seen["modules"] == []
    assert seen["infos"]["acme-plain"] == ["blocked", None]


def test_a_range_of_releases_is_checked_without_importing_packaging(tmp_path, dist_site):
    # What build backends write: the common case, on every cold start with a plugin.
    dist_site("acme-plain", ["hostcore<0.3,>=0.2", "msgspec>=0.18"], "VALUE = 1\n")
    dist_site("acme-future", [f"hostcore{FUTURE_RANGE}"], MUST_NOT_IMPORT)
    seen = packaging_modules_after_loading(tmp_path, tmp_path / "site",
                                           "acme-plain,acme-future")
    assert seen["modules"] == []
    assert seen["infos"]["acme-plain"] == ["loaded", ">=0.2,<0.3"]
    assert seen["infos"]["acme-future"] == ["failed", FUTURE_RANGE]


RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(
    lambda parts: ".".join(map(str, parts)))
CLAUSES = st.lists(st.tuples(st.sampled_from([">=", "<=", "==", "!=", "<", ">"]), RELEASES),
                   min_size=1, max_size=3)


@given(host=RELEASES, clauses=CLAUSES, spaced=st.booleans())
def test_the_check_without_packaging_agrees_with_packaging(host, clauses, spaced):
    gap = " " if spaced else ""
    line = "hostcore" + gap + f",{gap}".join(f"{op}{gap}{v}" for op, v in clauses)
    plain = _plain_verdicts([line], host)
    assert plain is not None, line
    assert plain == _packaging_verdicts([line], host)


@pytest.mark.parametrize(("requires", "host", "expected"), [
    (["hostcore>=0.2,<0.3"], "0.4.0", (">=0.2,<0.3", "built for hostcore >=0.2,<0.3; "
                                                     "this is 0.4.0")),
    (["hostcore<0.3,>=0.2"], "0.2.7", (">=0.2,<0.3", None)),
    # A development build of the host loads the plugins it is developed with.
    (["hostcore>=0.2,<0.3"], "0.2.1.dev3", (">=0.2,<0.3", None)),
    (["HostCore (>=0.2)"], "0.1.0", (">=0.2", "built for hostcore >=0.2; this is 0.1.0")),
    # Two requirements on hostcore both apply.
    (["hostcore>=0.2", 'hostcore!=0.2.3; python_version >= "3"'], "0.2.3",
     (">=0.2,!=0.2.3", "built for hostcore >=0.2,!=0.2.3; this is 0.2.3")),
    (["hostcore-gh>=0.2,<0.3"], "0.4.0", (None, None)),
])
def test_host_range_check(requires, host, expected):
    assert host_range_check(requires, host) == expected
