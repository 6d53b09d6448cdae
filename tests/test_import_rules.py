"""The import rules that docs/architecture.md ("Layout") and each package's ``__init__``
state, checked over the source with ``ast``: nothing here imports hostcore.

An import is one of three kinds: at module level (it runs when the module is imported,
class bodies and ``try`` blocks included), lazy (inside a function: it runs when the
function is called) or typing (under ``if TYPE_CHECKING:``: it never runs, and any
module may name any other there, so it is not checked). Names a package's ``__init__``
resolves on first use (``importlib``, by name) are not imports the source shows; the
last rule below keeps hostcore's own modules from leaning on them, so what is checked
here is the whole static graph.

The modules fall into layers (:func:`layer`); every rule is "a module of layer X
imports, at module level or lazily, only modules of these layers". The root package
``hostcore`` imports nothing at module level, so importing it (for ``__version__``) is
allowed everywhere.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

HOSTCORE = Path(__file__).resolve().parents[1] / "hostcore"

# Import nothing of hostcore but hostcore.errors and hostcore.config_tables (errors,
# timestamps, config_tables, msgspec_import and digests: nothing).
FOUNDATION = frozenset({"hostcore.errors", "hostcore.timestamps", "hostcore.config",
                        "hostcore.config_tables", "hostcore.msgspec_import", "hostcore.digests",
                        "hostcore.files", "hostcore.records", "hostcore.telemetry",
                        "hostcore.steps"})
# Each keeps its engine, its built-in plugin.py and its commands.py together.
DOMAINS = ("evidence", "export", "workitems", "scaffold", "agents", "governance")
# What reaches a destination's hash definitions: the one cross-domain module-level import.
EXPORT_REF = "hostcore.export.ref"
# Package __init__s whose names resolve on first use: they import nothing at module level.
LAZY_INITS = ("hostcore", "hostcore.plugin", "hostcore.export", "hostcore.cli",
              "hostcore.governance")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(HOSTCORE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(HOSTCORE.rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    source: str
    line: int
    target: str  # the hostcore module this import loads
    kind: str  # "module", "lazy" or "typing"
    name: str | None = None  # for ``from P import name`` when name is no submodule of P

    def __str__(self) -> str:
        where = MODULES[self.source].relative_to(HOSTCORE.parent) \
            if self.source in MODULES else self.source
        what = f"{self.target} ({self.name})" if self.name else self.target
        return f"{where}:{self.line} imports {what} [{self.kind}]"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def collect(source: str, text: str, is_package: bool = False) -> list[Import]:
    """Every import of a ``hostcore`` module in ``text``, the code of module ``source``."""
    found: list[Import] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    visit_one(statement, "typing")
                for statement in child.orelse:
                    visit_one(statement, kind)
            else:
                visit_one(child, kind)

    def visit_one(node: ast.AST, kind: str) -> None:
        if kind == "module" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                           | ast.Lambda):
            kind = "lazy"
        if isinstance(node, ast.Import):
            found.extend(Import(source, node.lineno, alias.name, kind) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = source.split(".") if is_package else source.split(".")[:-1]
                anchor = package[:len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:
                    found.append(Import(source, node.lineno, submodule, kind))
                else:
                    found.append(Import(source, node.lineno, base, kind, alias.name))
        visit(node, kind)

    visit(ast.parse(text), "module")
    return [i for i in found if i.target.split(".")[0] == "hostcore"]


IMPORTS: list[Import] = [
    i for name, path in MODULES.items()
    for i in collect(name, path.read_text(), is_package=path.name == "__init__.py")]


def _calls_alias(path: Path) -> bool:
    return any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
               and isinstance(s.value.func, ast.Name) and s.value.func.id == "alias"
               for s in ast.parse(path.read_text()).body)


# The one-line deprecated aliases of 0.1's module paths (``alias(__name__, ...)``).
ALIASES = frozenset(m for m, p in MODULES.items() if m.count(".") == 1 and _calls_alias(p))


def layer(module: str) -> str:
    """The layer a hostcore module belongs to (``"unplaced"`` if none)."""
    parts = module.split(".")
    if module == "hostcore":
        return "root"
    if module in FOUNDATION:
        return "foundation"
    if module in ALIASES:
        return "alias"
    special = {"hostcore.__main__": "main", "hostcore._moved": "moved",
               "hostcore.host": "host", "hostcore.tick": "host",
               "hostcore.plugin.cli": "plugin.cli"}
    if module in special:
        return special[module]
    if len(parts) < 2 or f"hostcore.{parts[1]}" not in MODULES \
            or MODULES[f"hostcore.{parts[1]}"].name != "__init__.py":
        return "unplaced"
    package = parts[1]
    # A command of its own module (evidence/usage_command.py) is a commands module too.
    if package in DOMAINS and (parts[2:] == ["commands"]
                               or (len(parts) == 3 and parts[2].endswith("_command"))):
        return f"{package}.commands"
    if package in (*DOMAINS, "plugin", "cli", "testing"):
        return package
    return "unplaced"


def breaches(sources: Callable[[str], bool], allowed: Iterable[str],
             kinds: Iterable[str] = ("module",), imports: Iterable[Import] = IMPORTS
             ) -> list[str]:
    """The imports of the modules ``sources`` picks, of the given kinds, whose target is
    neither the root package nor in ``allowed`` (layer names or module names)."""
    allowed = set(allowed)
    picked = [m for m in MODULES if sources(m)]
    assert picked, "the rule applies to no module: is the source tree where it should be?"
    return [str(i) for i in imports
            if sources(i.source) and i.kind in kinds and i.target != "hostcore"
            and i.target not in allowed and layer(i.target) not in allowed]


def in_layers(*names: str) -> Callable[[str], bool]:
    return lambda module: layer(module) in names


BELOW_THE_HOST = ("foundation", "plugin")


# ---------------------------------------------------------------------------------------
# The collector itself: it can tell the three kinds apart, so the rules below can fail.


def test_the_collector_tells_module_level_lazy_and_typing_imports_apart():
    text = ("from typing import TYPE_CHECKING\n"
            "import hostcore.host\n"
            "from hostcore.export import ref\n"
            "from . import store\n"
            "class C:\n    from hostcore.tick import TickReport\n"
            "if TYPE_CHECKING:\n    from hostcore.workitems.ledger import Ledger\n"
            "def f():\n    from hostcore.cli.app import run_cli\n")
    found = {(i.target, i.kind) for i in collect("hostcore.evidence.seam", text)}
    assert found == {("hostcore.host", "module"), (EXPORT_REF, "module"),
                     ("hostcore.evidence.store", "module"), ("hostcore.tick", "module"),
                     ("hostcore.workitems.ledger", "typing"),
                     ("hostcore.cli.app", "lazy")}


def test_a_breach_is_reported_with_its_file_and_line():
    text = "from hostcore.errors import HostcoreError\nfrom hostcore.host import Host\n"
    imports = collect("hostcore.files", text)
    assert breaches(in_layers("foundation"), {"hostcore.errors"}, imports=imports) == [
        "hostcore/files.py:2 imports hostcore.host (Host) [module]"]


# ---------------------------------------------------------------------------------------
# The rules, bottom up.


def test_every_module_belongs_to_a_layer():
    assert {m for m in MODULES if layer(m) == "unplaced"} == set()
    assert {i.target for i in IMPORTS if layer(i.target) == "unplaced"} == set()


def test_foundation_modules_import_only_errors_and_config_tables():
    assert breaches(in_layers("foundation"), {"hostcore.errors", "hostcore.config_tables"},
                    ("module", "lazy")) == []
    assert breaches(lambda m: m in ("hostcore.errors", "hostcore.timestamps",
                                    "hostcore.config_tables", "hostcore.msgspec_import",
                                    "hostcore.digests", "hostcore._moved"), (),
                    ("module", "lazy")) == []


def test_lazy_package_inits_and_main_import_nothing_at_module_level():
    assert breaches(lambda m: m in (*LAZY_INITS, "hostcore.__main__"), ()) == []
    assert breaches(in_layers("root"), (), ("module", "lazy")) == []


def test_main_imports_only_the_cli_application_and_only_lazily():
    assert breaches(in_layers("main"), {"cli", "hostcore.msgspec_import"}, ("lazy",)) == []


def test_plugin_package_but_plugin_cli_is_below_the_host():
    assert breaches(in_layers("plugin"), BELOW_THE_HOST, ("module", "lazy")) == []


def test_host_and_tick_import_the_domain_engines_only_lazily():
    assert breaches(in_layers("host"), {*BELOW_THE_HOST, "host"}) == []
    assert breaches(in_layers("host"), {*BELOW_THE_HOST, "host", "evidence", "export",
                                        "workitems"}, ("lazy",)) == []


def test_domain_engines_import_no_other_domain_but_export_ref_at_module_level():
    for domain in DOMAINS:
        assert breaches(in_layers(domain), {*BELOW_THE_HOST, domain, EXPORT_REF}) == []


def test_export_ref_imports_only_the_foundation():
    assert breaches(lambda m: m == EXPORT_REF, {"foundation"}, ("module", "lazy")) == []


def test_domain_engines_lazily_import_only_their_commands_and_export_the_ledger():
    for domain in DOMAINS:
        extra = {"hostcore.workitems.ledger"} if domain == "export" else set()
        assert breaches(in_layers(domain), {*BELOW_THE_HOST, domain, EXPORT_REF,
                                            f"{domain}.commands", *extra}, ("lazy",)) == []


def test_a_commands_module_is_imported_only_by_name_from_its_plugin_s_declaration():
    # No import statement names a domain's commands module: its plugin declares the
    # commands by "module:attribute" (DECLARED_COMMANDS), which hostcore.plugin.declared
    # imports when a command is looked up or a group asks for them. agents' `hook` and
    # `hooks` still come from its hook alone, which imports them inside the function.
    for domain in DOMAINS:
        importers = {(i.source, i.kind) for i in IMPORTS
                     if i.target == f"hostcore.{domain}.commands" and i.kind != "typing"}
        if domain == "agents":
            assert importers == {("hostcore.agents.plugin", "lazy")}, importers
            continue
        assert importers == set(), importers
        plugin = (HOSTCORE / domain / "plugin.py").read_text(encoding="utf-8")
        assert f'"hostcore.{domain}.commands:' in plugin, domain


def test_plugin_cli_and_the_commands_modules_sit_on_the_host():
    assert breaches(in_layers("plugin.cli"), {*BELOW_THE_HOST, "hostcore.host"},
                    ("module", "lazy")) == []
    for domain in DOMAINS:
        assert breaches(in_layers(f"{domain}.commands"),
                        {*BELOW_THE_HOST, "plugin.cli", "hostcore.host", domain, EXPORT_REF},
                        ("module", "lazy")) == []


# The hook's lean path (hostcore.cli.hook) runs an agent event without the click
# application, so it reaches the agents domain's runner itself, lazily.
AGENT_HOOK = "hostcore.agents.hook"
# Before it, the stdlib-only dispatcher that decides whether any plugin is due, and
# the runner of the plugins' lean handlers, which builds no host either.
AGENT_DISPATCH = "hostcore.agents.dispatch"
AGENT_LEAN = "hostcore.agents.lean_path"


def test_cli_application_imports_no_domain_package():
    assert breaches(lambda m: layer(m) == "cli" and m != "hostcore.cli.hook",
                    {*BELOW_THE_HOST, "plugin.cli", "host", "cli"}, ("module", "lazy")) == []
    # At module level the hook's lean path reads its options (cli.argv, the standard
    # library alone) and nothing of the application.
    assert breaches(lambda m: m == "hostcore.cli.hook",
                    {"foundation", "plugin", "host", "hostcore.cli.argv"}) == []
    assert breaches(lambda m: m == "hostcore.cli.argv", set()) == []
    assert breaches(lambda m: m == "hostcore.cli.hook",
                    {*BELOW_THE_HOST, "host", AGENT_HOOK, AGENT_DISPATCH, AGENT_LEAN},
                    ("lazy",)) == []


def test_testing_imports_the_host_the_cli_and_the_domains_only_lazily():
    assert breaches(in_layers("testing"), {*BELOW_THE_HOST, "testing"}) == []
    assert breaches(in_layers("testing"), {*BELOW_THE_HOST, "testing", "hostcore.host", "cli",
                                           "evidence", "export", "workitems", "agents"},
                    ("lazy",)) == []


def test_deprecated_aliases_import_only_moved_and_nothing_imports_them():
    assert len(ALIASES) >= 10
    assert breaches(in_layers("alias"), {"moved"}) == []
    assert breaches(in_layers("alias"), {"moved", *BELOW_THE_HOST, *DOMAINS, "testing"},
                    ("lazy",)) == []
    importers = sorted(str(i) for i in IMPORTS if i.kind != "typing" and (
        i.target in ALIASES or (i.target == "hostcore._moved" and i.source not in ALIASES)))
    assert importers == []


def test_module_level_imports_form_no_cycle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        if i.kind == "module" and i.target in graph:
            graph[i.source].add(i.target)
    done: set[str] = set()

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return None
        for target in sorted(graph[module]):
            found = cycle_from(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    cycles = {frozenset(c): c for m in sorted(graph) if (c := cycle_from(m, []))}
    assert list(cycles.values()) == []


def _bound_at_module_level(path: Path) -> set[str]:
    """The names a module binds when it runs (not under TYPE_CHECKING, not in a body)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.orelse:
                    visit_one(statement)
            else:
                visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif not isinstance(node, ast.Lambda):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            visit(node)

    visit(ast.parse(path.read_text()))
    return names


def test_a_name_imported_from_a_package_is_bound_in_its_init():
    # A name a package's __getattr__ resolves on first use would hide an import from
    # these rules: inside hostcore, import such a name from its home module.
    lazy = [str(i) for i in IMPORTS
            if i.kind != "typing" and i.name is not None and i.target in MODULES
            and i.name not in _bound_at_module_level(MODULES[i.target])]
    assert lazy == []
