"""A throwaway PostgreSQL server for tests and benchmarks, from the machine's own binaries.

:class:`LocalServer` runs ``initdb`` and ``pg_ctl`` in a temporary folder and
listens on a Unix socket in that folder only (``listen_addresses = ''``: no TCP
port). ``initdb`` refuses to run as root, so as root the server runs as the
``postgres`` user (``runuser -u postgres --``) and the folder is handed to it.

The superuser is ``postgres`` and may connect over the socket without a
password; every other role authenticates with its password (``scram-sha-256``),
so wrong credentials are refused as on a real server.

Not part of the destination: nothing in :mod:`hostcore_postgres` imports it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPERUSER = "postgres"
# Where Debian's postgresql packages put the binaries, newest version last.
BINARY_GLOB = "/usr/lib/postgresql/*/bin"
# Seconds pg_ctl waits for the server to start or stop.
START_TIMEOUT_SECONDS = 60

_HBA = (
    f"local all {SUPERUSER} trust\n"
    "local all all scram-sha-256\n"
)


def find_binaries() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None when there is none."""
    found = [Path(p) for p in glob.glob(BINARY_GLOB) if (Path(p) / "initdb").is_file()]
    if found:
        return max(found, key=lambda p: _version_key(p.parent.name))
    initdb = shutil.which("initdb")
    if initdb is not None:
        folder = Path(initdb).resolve().parent
        if (folder / "pg_ctl").is_file():
            return folder
    return None


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as when this process is root (initdb refuses root);
    None when it runs as this process's user."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise RuntimeError(f"running as root, the server must run as the {SUPERUSER!r} user "
                           "(initdb refuses root), and there is none: install Debian's "
                           "postgresql package, which creates it") from None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


@dataclass
class LocalServer:
    """A PostgreSQL cluster under ``folder``; see the module docstring.

    :param bindir: the folder of the server binaries (:func:`find_binaries`).
    :param durable: keep ``fsync`` on (benchmarks); tests turn it off for speed,
        which costs nothing they check: they kill clients, not the machine.
    """

    bindir: Path
    durable: bool = False
    folder: Path | None = None

    @property
    def socket_dir(self) -> Path:
        assert self.folder is not None, "the server was not created"
        return self.folder

    @property
    def data_dir(self) -> Path:
        return self.socket_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.socket_dir / "server.log"

    def create(self) -> LocalServer:
        """initdb a new cluster in a fresh temporary folder (a short path: socket
        paths are limited to about 100 bytes)."""
        account = _server_account()
        self.folder = Path(tempfile.mkdtemp(prefix="hcpg-", dir="/tmp"))
        if account is not None:
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "-E", "UTF8",
                  "--no-locale", "--no-sync", "--auth-local=trust", "--auth-host=reject")
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(_HBA)
        if account is not None:
            os.chown(hba, account.pw_uid, account.pw_gid)
        return self

    def start(self) -> None:
        options = [f"-c unix_socket_directories={self.socket_dir}", "-c listen_addresses=''",
                   "-c max_connections=100"]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off",
                        "-c full_page_writes=off"]
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w",
                  "-t", str(START_TIMEOUT_SECONDS), "-o", " ".join(options), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-m", mode, "stop")

    def restart(self) -> None:
        """Stop (``fast``: every session is terminated, its transaction rolled back)
        and start again."""
        self.stop("fast")
        self.start()

    def destroy(self) -> None:
        """Stop the server if it runs and remove its folder."""
        if self.folder is None:
            return
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def dsn(self, dbname: str = "postgres", user: str = SUPERUSER, **extra: str) -> str:
        """A libpq connection string to ``dbname`` over this server's socket."""
        parts = {"host": str(self.socket_dir), "dbname": dbname, "user": user, **extra}
        return " ".join(f"{key}={value}" for key, value in parts.items())

    def admin(self, dbname: str = "postgres") -> Any:
        """A superuser connection in autocommit mode (for CREATE DATABASE, roles, ...)."""
        import psycopg

        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def create_database(self, name: str) -> str:
        """Create the database ``name`` and return a superuser DSN for it."""
        from psycopg import sql

        with self.admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def _run(self, tool: str, *args: str) -> None:
        self._as_owner([str(self.bindir / tool), *args])

    def _as_owner(self, argv: list[str]) -> None:
        if os.geteuid() == 0:
            argv = ["runuser", "-u", SUPERUSER, "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, cwd=self.socket_dir,
                                check=False)
        if result.returncode != 0:
            log = self.log_file.read_text("utf-8", "replace")[-2000:] if (
                self.log_file.exists()) else ""
            raise subprocess.CalledProcessError(result.returncode, argv,
                                                result.stdout, result.stderr + log)
