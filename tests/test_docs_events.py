"""Every catalogued event is documented, and code emits only catalogued, documented events."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import importlib_metadata
import pytest

from hostcore import Host

REPO = Path(__file__).resolve().parents[1]
EVENT_HEADING = re.compile(r"^## ([a-z0-9_]+(?:\.[a-z0-9_]+)+)\s*$", re.MULTILINE)
# emit("name" ...) with a literal name: host.emit, telemetry.emit, self._emit wrappers.
EMIT_LITERAL = re.compile(r"""\bemit\(\s*["']([a-z0-9_.]+)["']""")


def documented() -> set[str]:
    return set(EVENT_HEADING.findall((REPO / "docs" / "events.md").read_text("utf-8")))


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> set[str]:
    """The catalog of a host with the built-ins and every distribution of this tree.

    Only this tree's distributions: a third-party plugin that happens to be
    installed (an example, say) documents its events itself.
    """
    allow = ",".join(dist_name(d) for d in distributions())
    host = Host(root=tmp_path_factory.mktemp("catalog"), load_entrypoints=True,
                env={"HOSTCORE_LOAD_PLUGINS": allow})
    try:
        failed = {i.name: i.error for i in host.plugins.infos.values() if i.status == "failed"}
        assert not failed, f"installed plugins failed to load: {failed}"
        return {spec.name for spec in host.catalog}
    finally:
        host.close()


def source_files() -> list[Path]:
    """Shipped code of hostcore and of every distribution under plugins/ and contrib/."""
    roots = [REPO / "hostcore"]
    for dist in distributions():
        roots += [p for p in dist.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    return sorted(f for root in roots for f in root.rglob("*.py") if "tests" not in f.parts)


def distributions() -> list[Path]:
    return sorted(p.parent for p in REPO.glob("*/*/pyproject.toml")
                  if p.parent.parent.name in ("plugins", "contrib"))


def dist_name(folder: Path) -> str:
    return tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]["name"]


def emitted() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in source_files():
        for name in EMIT_LITERAL.findall(path.read_text("utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(REPO)))
    return found


def test_every_catalogued_event_has_a_section(catalog):
    missing = sorted(catalog - documented())
    assert not missing, f"events missing a `## name` section in docs/events.md: {missing}"


def test_every_documented_event_is_catalogued(catalog):
    stale = sorted(documented() - catalog)
    assert not stale, f"docs/events.md documents events nothing catalogues: {stale}"


def test_code_emits_only_catalogued_and_documented_events(catalog):
    found = emitted()
    assert "tick.completed" in found, "the scan finds the host's own emits"
    unknown = {name: where for name, where in found.items() if name not in catalog}
    assert not unknown, f"emitted but not catalogued: {unknown}"
    undocumented = {name: where for name, where in found.items() if name not in documented()}
    assert not undocumented, f"emitted but missing from docs/events.md: {undocumented}"


def test_every_distribution_in_the_tree_is_installed():
    # Otherwise its events would be missing from the catalog checked above.
    missing = []
    for dist in distributions():
        name = dist_name(dist)
        try:
            importlib_metadata.distribution(name)
        except importlib_metadata.PackageNotFoundError:
            missing.append(f"{name} ({dist.relative_to(REPO)})")
    assert not missing, f"not installed: {missing}; see requirements-dev.txt"
