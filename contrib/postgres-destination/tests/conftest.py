"""A real PostgreSQL server for these tests, started once per session (per xdist worker).

The server comes from the machine's binaries (:func:`find_binaries`): initdb and
pg_ctl in a temporary folder, a Unix socket, no TCP port. Each test gets a
database of its own (the ``pg`` fixture), so tests never see each other's rows.
Without binaries every test that needs the server skips, saying how to get them
(and fails, where ``$HOSTCORE_REQUIRED_TOOLS`` requires ``postgresql``).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hostcore_postgres.local_server import LocalServer, find_binaries

from hostcore.evidence.store import EvidenceRow
from hostcore.host import Host
from hostcore.testing import require_tool

_databases = itertools.count()
_roles = itertools.count()
DOC = Path(__file__).resolve().parents[3] / "docs" / "postgres.md"
MACHINE_PASSWORD = "machine-role-pw-1"
# [plugins.export] for tests whose next run follows a failure at once: a back-off of
# 10 ms. (The back-off itself is tested in test_postgres_backoff.py.)
QUICK_RETRY = {"backoff_seconds": 0.01, "backoff_max_seconds": 0.01}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[LocalServer]:
    bindir = find_binaries()
    # Skips where the binaries are missing; fails instead where CI requires them.
    require_tool("postgresql", "Debian's `postgresql` package: initdb and pg_ctl in "
                 "/usr/lib/postgresql/*/bin or on PATH", found=bindir is not None)
    assert bindir is not None
    server = LocalServer(bindir).create()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def pg(pg_server: LocalServer) -> Pg:
    """The server, a new empty database of this test, and helpers to look into it."""
    return Pg(pg_server, pg_server.create_database(f"t{os.getpid()}_{next(_databases)}"))


@dataclass
class Pg:
    server: LocalServer
    dsn: str  # the superuser's, to this test's database
    quick_retry: Mapping[str, float] = field(default_factory=lambda: QUICK_RETRY)

    def config(self, dsn: str | None = None, **extra: Any) -> dict[str, Any]:
        """A host configuration pushing into this test's database (with the short
        back-off of :data:`QUICK_RETRY`)."""
        return {"plugins": {"postgres-destination": {"dsn": dsn or self.dsn, **extra},
                            "export": QUICK_RETRY}}

    def query(self, statement: str, params: tuple[Any, ...] = (),
              dsn: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement (autocommit, as the superuser unless ``dsn``); its rows."""
        import psycopg

        with psycopg.connect(dsn or self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, params or None)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def held(self, origin: str, stream: str = "main", schema: str = "hostcore") -> list[int]:
        """The positions the database holds from ``origin``, in order."""
        rows = self.query(f"SELECT position FROM {schema}.rows WHERE stream = %s AND "
                          "origin = %s ORDER BY position", (stream, origin))
        return [int(r[0]) for r in rows]

    def role(self, name: str, password: str, *grants: str) -> str:
        """Create a login role with ``password`` and ``grants`` (``{role}`` is its
        name); returns a DSN for it, without the password."""
        self.query(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        for grant in grants:
            self.query(grant.format(role=name))
        return self.dsn.replace("user=postgres", f"user={name}")

    def machine(self, name: str) -> Machine:
        """A login role (named ``name`` plus a unique suffix: roles belong to the whole
        server) created with exactly docs/postgres.md's minimal grants."""
        role = f"{name}_{os.getpid()}_{next(_roles)}"
        database = self.dsn.split("dbname=")[1].split()[0]
        for statement in minimal_grants():
            statement = statement.replace("machine_042", role).replace(
                "'change me'", f"'{MACHINE_PASSWORD}'")
            self.query(statement.replace("DATABASE fleet", f"DATABASE {database}"))
        return Machine(role, self.dsn.replace("user=postgres", f"user={role}")
                       + f" password={MACHINE_PASSWORD}")

    @staticmethod
    def fill_root(root: Path, config: Mapping[str, Any] | None = None, *, rows: int = 10,
                  directories: tuple[str, ...] = ("/work/a",), withheld: tuple[str, ...] = (),
                  text: str = "x" * 40) -> str:
        """Add ``rows`` rows per directory to the store under ``root`` (``withheld``
        directories marked local-only) and write ``config`` as its hostcore.toml.
        Returns the store's instance id (the origin)."""
        root.mkdir(parents=True, exist_ok=True)
        host = Host(root=root, load_entrypoints=False, env={}, config={})
        try:
            for directory in directories:
                host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                              directory=directory,
                                              payload={"n": i, "text": text})
                                  for i in range(rows))
            for directory in withheld:
                host.policy.input("class-list").set(directory, "local-only")
            origin = host.store.instance_id
        finally:
            host.close()
        if config is not None:
            (root / "hostcore.toml").write_text(toml(config))
        return origin

    @staticmethod
    def hostcore(root: Path, *args: str, timeout: float = 120,
                 **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``python -m hostcore ARGS`` on ``root`` as a real process."""
        return subprocess.run([sys.executable, "-m", "hostcore", *args],
                              env=cli_env(root, **env), capture_output=True, text=True,
                              timeout=timeout)


    @staticmethod
    def spawn(root: Path, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``python -m hostcore ARGS`` on ``root`` (output captured as text)."""
        return subprocess.Popen([sys.executable, "-m", "hostcore", *args],
                                env=cli_env(root, **env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def minimal_grants() -> list[str]:
    """The statements of docs/postgres.md's "minimal role for one machine" block."""
    for block in re.findall(r"```sql\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL):
        if block.splitlines()[0].strip() == "-- minimal role for one machine":
            lines = [line for line in block.splitlines() if not line.strip().startswith("--")]
            return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
    raise AssertionError("docs/postgres.md has no minimal role block")


@dataclass
class Machine:
    """A machine's login role and a DSN for it (with its password)."""

    role: str
    dsn: str

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement as this role (autocommit); its rows."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, params or None)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def rowcount(self, statement: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement as this role; how many rows it touched."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(statement, params or None).rowcount  # type: ignore[arg-type]


def cli_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a real ``hostcore`` process on ``root``: only this plugin,
    and none of the test runner's own ``PG*`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return {**env, "HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": "postgres-destination",
            **extra}


def toml(config: Mapping[str, Any]) -> str:
    """TOML for the nested tables of strings and numbers these tests use."""
    lines: list[str] = []

    def table(prefix: str, values: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        if scalars:
            lines.append(f"[{prefix}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
        for k, v in values.items():
            if isinstance(v, Mapping):
                table(f"{prefix}.{k}" if prefix else k, v)

    table("", config)
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, int | float):
        return str(value)
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
