"""What the config file is called, and how a plugin's ``[plugins.<name>]`` table is
found among its tables.

One rule for the host's config (:mod:`hostcore.config`) and for the hook's lean path
(:mod:`hostcore.agents.lean_path`), which reads the config without the host: any
spelling that PEP 503 normalises to the same name is the same table, as it is the
same distribution (``[plugins.claude_code]`` for ``claude-code``), and two spellings
of one table are refused.

Imports only the standard library.
"""

from __future__ import annotations

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# The default config file, in the state root.
CONFIG_FILE_NAME = "hostcore.toml"
_SEPARATORS = frozenset("-_.")


def table_name(name: str) -> str:
    """``name`` as plugin tables are matched: PEP 503 normalised (each run of ``-``,
    ``_`` and ``.`` one ``-``, lower case), so ``claude_code``, ``Claude.Code`` and
    ``claude-code`` are one table (as they are one distribution). Without :mod:`re`,
    whose compiling a pattern at import would cost every hook that reads a config."""
    kept: list[str] = []
    for char in name.lower():
        if char not in _SEPARATORS:
            kept.append(char)
        elif not kept or kept[-1] != "-":  # every "-" kept stands for a run
            kept.append("-")
    return "".join(kept)


def find_table(tables: Mapping[str, object], name: str) -> tuple[str, object] | None:
    """The key and value of ``name``'s table among ``tables`` (the ``plugins``
    tables), under any spelling :func:`table_name` makes the same; ``None`` when
    there is none."""
    wanted = table_name(name)
    return next(((key, value) for key, value in tables.items()
                 if table_name(key) == wanted), None)


def two_spellings(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of ``names`` (the ``plugins`` tables' keys) that spell one table,
    in their order; ``None`` when each names its own: which one a plugin would read
    would be an accident."""
    spellings: dict[str, str] = {}
    for name in names:
        other = spellings.setdefault(table_name(name), name)
        if other != name:
            return other, name
    return None
