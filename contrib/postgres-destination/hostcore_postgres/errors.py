"""What went wrong, as one line and one kind: the server's errors translated.

Every failure the destination reports is a :class:`PostgresDestinationError`: a
``kind`` (one of :data:`KINDS`, what telemetry carries) and a one-line message
for the person at the terminal. The message quotes the server's primary text,
which names roles, databases and sockets but never a password (libpq does not
echo one); the connection string itself is never quoted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hostcore.errors import HostcoreError

if TYPE_CHECKING:
    import psycopg

KINDS = (
    "unreachable",       # no server answered at that address
    "credentials",       # the server refused the role or its password
    "missing_database",  # the server has no such database
    "schema_newer",      # the database was migrated by a newer hostcore-postgres
    "schema_missing",    # no schema (or an older one) and this role may not create it
    "schema_altered",    # a table is not as the schema version defines it
    "migration_failed",  # a migration failed and was rolled back
    "permission",        # the role lacks a grant docs/postgres.md lists
    "connection_lost",   # the connection broke during an operation
    "bad_row",           # the server refused a value of a row
    "origin_taken",      # the database holds this store's origin for another role
    "statement_timeout",  # the server cancelled the push at its statement_timeout
    "refused",           # anything else the server refused
)

# SQLSTATEs of a refused login: invalid_password, invalid_authorization_specification.
_CREDENTIAL_STATES = ("28P01", "28000")
# The schema's own guards (schema.py, version 2): another role's origin; a position
# moving back or a refs row changing origin.
_ORIGIN_TAKEN, _GUARD_REFUSED = "HC001", "HC002"
# query_canceled: a statement_timeout (or someone's pg_cancel_backend)
_CANCELED = "57014"
_RESUMES = "; the next run resumes from what the database holds"
# Kept as text: compiled (and cached by re) only when a failure is classified.
_MISSING_DATABASE = r'database "[^"]*" does not exist'
_CREDENTIALS = (r"password|authentication|no pg_hba\.conf entry|"
                r'role "[^"]*" does not exist')


class PostgresDestinationError(HostcoreError):
    """The destination could not do what it was asked; nothing unsafe was written.

    ``kind`` is one of :data:`KINDS`.
    """

    def __init__(self, kind: str, message: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown failure kind {kind!r}")
        self.kind = kind
        super().__init__(f"postgres destination: {message}")

    def __reduce__(self) -> tuple[type[PostgresDestinationError], tuple[str, str]]:
        return (type(self), (self.kind, str(self).removeprefix("postgres destination: ")))


def explain_connect(exc: psycopg.Error) -> PostgresDestinationError:
    """A failure of ``psycopg.connect`` as a clear line.

    libpq reports a refused login without its SQLSTATE, so the kind is read from
    its (English) text; any other text still reads right as "cannot connect".
    """
    said = server_said(exc)
    if exc.sqlstate == "3D000" or re.search(_MISSING_DATABASE, said):
        return PostgresDestinationError("missing_database", f"the server has no such database "
                                        f"({said}); create it or fix the dsn")
    if exc.sqlstate in _CREDENTIAL_STATES or re.search(_CREDENTIALS, said):
        return PostgresDestinationError(
            "credentials", f"the server refused the login ({said}); check the role and its "
            "password (.pgpass, PGPASSWORD or PGPASSFILE)")
    return PostgresDestinationError("unreachable", f"cannot connect to the server ({said}); "
                                    f"nothing was pushed{_RESUMES}")


def explain(exc: psycopg.Error, *, broken: bool, during: str,
            rows: int = 0) -> PostgresDestinationError:
    """A failure of a statement ``during`` an operation ("the push", ...) as a clear line.

    ``broken`` is true when the connection is unusable afterwards; ``rows`` is how
    many rows the push carried.
    """
    state = exc.sqlstate or ""
    said = server_said(exc)
    if state == _CANCELED and not broken and "statement timeout" in said:
        return PostgresDestinationError(
            "statement_timeout", f"the server cancelled {during} of {rows} row(s) at this "
            f"role's statement_timeout ({said}); nothing of it was written. Set fewer rows "
            "per push with [plugins.export] batch_rows, or raise the role's "
            "statement_timeout")
    if state == _ORIGIN_TAKEN:
        return PostgresDestinationError(
            "origin_taken", f"the database refused {during} ({said}): each origin belongs "
            "to the role that first pushed it; the database owner must check who claimed "
            "it (see docs/postgres.md)")
    if state == _GUARD_REFUSED:
        return PostgresDestinationError("refused", f"the database refused {during} "
                                        f"({said}); nothing of it was written")
    if broken or state[:2] in ("08", "57"):
        return PostgresDestinationError(
            "connection_lost", f"the connection to the server was lost during {during} "
            f"({said}); a push is one transaction, so it committed whole or not at all"
            f"{_RESUMES}")
    if state == "42501":
        return PostgresDestinationError(
            "permission", f"permission denied during {during} ({said}); the role needs the "
            "grants docs/postgres.md lists")
    if state[:2] == "42":
        return PostgresDestinationError(
            "schema_altered", f"the tables are not as this schema version defines them "
            f"({said}): altered by hand? Restore them as docs/postgres.md defines them")
    if state[:2] == "22":
        return PostgresDestinationError("bad_row", f"the server refused a value during "
                                        f"{during} ({said}); nothing of it was written")
    if state == "23505":  # unique_violation: rows past the position refs records
        return PostgresDestinationError(
            "refused", f"the database already holds a row past the position its refs table "
            f"records ({said}): refs was edited by hand; nothing was written")
    return PostgresDestinationError("refused", f"the server refused {during} ({said}); "
                                    "nothing of it was written")


def server_said(exc: psycopg.Error) -> str:
    """The server's (or libpq's) primary message, on one line."""
    text = exc.diag.message_primary or str(exc) or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
