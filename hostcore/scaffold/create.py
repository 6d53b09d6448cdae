"""Scaffolding: write a ready-to-install plugin package of one kind.

``hostcore new-plugin NAME --kind KIND`` calls :func:`create_plugin`. The package
it writes has a ``pyproject.toml`` with the ``hostcore`` entry point, a package
``hostcore_<name>`` holding a small working plugin of that kind (one of the
registration kinds, or ``command``: a ``hostcore NAME`` command), a README, and a
test module running hostcore's conformance suite for the kind beside tests of the
plugin's behaviour. It passes its own tests right after ``pip install -e``.

The templates are files under ``hostcore/scaffold/templates/`` (``common/`` for
every kind, one folder per kind), filled with :class:`string.Template`. The
package is written to a temporary folder beside the target and renamed into
place, so a failure never leaves half a package behind.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from hostcore import __version__
from hostcore.errors import HostcoreError

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MAX_NAME_LENGTH = 40


class ScaffoldError(HostcoreError):
    """The plugin cannot be scaffolded as asked (bad name, occupied folder)."""


@dataclass(frozen=True)
class KindTemplate:
    """What differs between kinds: the README's words and the conformance suite."""

    summary: str
    suite: str
    details: str
    config: str


KINDS: dict[str, KindTemplate] = {
    "source": KindTemplate(
        summary="A hostcore evidence source reading an append-only JSON Lines file.",
        suite="SourceConformance",
        details="Every tick hostcore asks the source for the lines added since its cursor "
                "and stores one evidence row per JSON object line.",
        config="```toml\n[plugins.$name]\npath = \"/var/log/my-agent/events.jsonl\"  "
               "# default: <root>/plugins/$name/inbox.jsonl\n```",
    ),
    "provider": KindTemplate(
        summary="A hostcore work-item provider for tasks kept in a JSON file.",
        suite="ProviderConformance",
        details="hostcore's poller lists the open tasks, keeps a ledger record per task and "
                "asks the provider whether tasks that left the list were closed.",
        config="```toml\n[plugins.$name]\npath = \"/home/me/tasks.json\"  "
               "# default: <root>/plugins/$name/tasks.json\n```",
    ),
    "policy_input": KindTemplate(
        summary="A hostcore withholding-policy input keeping listed directories private.",
        suite="PolicyInputConformance",
        details="Evidence recorded in a listed directory, or below it, never leaves "
                "hostcore's store through the export seam.",
        config="```toml\n[plugins.$name]\nwithhold = [\"/home/me/clients/acme\"]\n```",
    ),
    "telemetry_sink": KindTemplate(
        summary="A hostcore telemetry sink counting events by name.",
        suite="TelemetrySinkConformance",
        details="`hostcore status` shows the running totals; closing the host writes them "
                "to `<root>/plugins/$name/counts.json`.",
        config="None: the sink has no settings.",
    ),
    "destination": KindTemplate(
        summary="A hostcore export destination writing JSON Lines files into a folder.",
        suite="DestinationConformance",
        details="hostcore's export pushes the rows its withholding policy permits; each "
                "origin's rows land in `<folder>/<stream>/<origin>.jsonl`, its governance in "
                "`<origin>.json`, and a rerun after any interruption neither loses nor "
                "duplicates a row.",
        config="```toml\n[plugins.$name]\nfolder = \"/srv/exports\"  "
               "# default: <root>/plugins/$name/out\n```",
    ),
    "command": KindTemplate(
        summary="A hostcore command reporting the state root and its plugins.",
        suite="CommandConformance",
        details="`hostcore $name` shows the state root and how many plugins of each status "
                "the host runs with; `hostcore $name --json` prints the same as one JSON "
                "document. The code is typed throughout and passes `mypy --strict`.",
        config="None: the command has no settings.",
    ),
    "worker": KindTemplate(
        summary="A hostcore worker draining an inbox folder a slice per tick.",
        suite="WorkerConformance",
        details="Each tick it moves up to ten files from `<root>/plugins/$name/inbox` to "
                "`done/`, and reports pending work while files remain.",
        config="None: drop files into `<root>/plugins/$name/inbox`.",
    ),
}


@dataclass(frozen=True)
class Names:
    """Every spelling of the plugin's name the templates use."""

    name: str

    @property
    def dist(self) -> str:
        return f"hostcore-{self.name}"

    @property
    def package(self) -> str:
        return "hostcore_" + self.name.replace("-", "_")

    @property
    def cls(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("-"))


def check_name(name: str) -> Names:
    """``name`` as :class:`Names`, or :class:`ScaffoldError` saying what is wrong."""
    if not _NAME.match(name) or len(name) > MAX_NAME_LENGTH:
        raise ScaffoldError(
            f"plugin name {name!r} must be lowercase letters and digits, words joined by "
            f"single hyphens, starting with a letter, at most {MAX_NAME_LENGTH} characters "
            "(e.g. 'task-folder')")
    return Names(name)


# The spellings of 0.1, still accepted by `new-plugin --kind` (with a warning).
LEGACY_KINDS = {"policy": "policy_input", "sink": "telemetry_sink"}


def create_plugin(name: str, kind: str, directory: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the package for plugin ``name`` of ``kind`` into ``directory``.

    ``directory`` defaults to ``./hostcore-<name>``; it must not exist or be empty.
    Returns the package folder and the files written, relative to it.
    """
    names = check_name(name)
    template = KINDS.get(kind)
    if template is None:
        raise ScaffoldError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    target = Path(directory) if directory is not None else Path.cwd() / names.dist
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(f"{target} already exists and is not an empty folder; "
                            "nothing was written")
    files = _render(names, kind, template)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.chmod(0o755)  # mkdtemp makes it owner-only; this is source, not state
        if target.exists():
            target.rmdir()  # empty, checked above
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target, sorted(files)


def _render(names: Names, kind: str, template: KindTemplate) -> dict[Path, str]:
    values = {
        "name": names.name,
        "dist": names.dist,
        "package": names.package,
        "cls": names.cls,
        "func": names.name.replace("-", "_"),
        "kind": kind,
        "suite": template.suite,
        "summary": template.summary,
        "hostcore_version": ".".join(__version__.split(".")[:2]),
    }
    values["details"] = Template(template.details).substitute(values)
    values["config"] = Template(template.config).substitute(values)
    root = resources.files("hostcore.scaffold") / "templates"
    sources = {
        Path("pyproject.toml"): root / "common" / "pyproject.toml.tmpl",
        Path("README.md"): root / "common" / "README.md.tmpl",
        Path(names.package) / "__init__.py": root / "common" / "__init__.py.tmpl",
        Path(names.package) / "plugin.py": root / kind / "plugin.py.tmpl",
        Path("tests") / f"test_{names.package}.py": root / kind / "test.py.tmpl",
    }
    # Modules of the package beside plugin.py (a command kind's command.py), if any.
    for extra in sorted((root / kind).iterdir(), key=lambda t: t.name):
        if extra.name.endswith(".py.tmpl") and extra.name not in ("plugin.py.tmpl",
                                                                   "test.py.tmpl"):
            sources[Path(names.package) / extra.name.removesuffix(".tmpl")] = extra
    return {path: Template(source.read_text(encoding="utf-8")).substitute(values)
            for path, source in sources.items()}
