"""The ``postgres-destination`` plugin: export into a shared PostgreSQL database.

Configured by the ``[plugins.postgres-destination]`` table of ``hostcore.toml``::

    [plugins.postgres-destination]
    dsn_env = "HOSTCORE_POSTGRES_DSN"   # or: dsn = "host=db.example dbname=fleet"
    schema = "hostcore"                 # optional

``dsn`` is a libpq connection string; ``dsn_env`` names an environment variable
holding one (so the string, and any password in it, stays out of the file).
libpq fills in what the string leaves out from its ``PG*`` variables and
``~/.pgpass``, as every libpq client does; ``dsn = ""`` takes everything from
them. Options such as ``sslmode`` pass through to libpq unchanged. Without
either key the destination is registered but unavailable: rows leave the store
only where someone asked for it.

Importing this module does not import psycopg: building a host stays cheap.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec

from hostcore.errors import ConfigError
from hostcore.export.ref import Ref
from hostcore.plugin.markers import hookimpl
from hostcore.telemetry import EventSpec
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.errors import KINDS

if TYPE_CHECKING:
    import click

    from hostcore.host import Host

PLUGIN_NAME = "postgres-destination"

EVENTS = (
    EventSpec(
        "postgres_destination.failed",
        {"kind": KINDS},
        "The PostgreSQL destination could not connect, read or push; the kind says why "
        "(nothing of a failed push was committed, and the next run resumes).",
    ),
    EventSpec(
        "postgres_destination.migrated",
        {"from_version": int, "to_version": int},
        "A push found no schema (version 0) and created it, or `hostcore postgres "
        "migrate` migrated an older one, in one transaction.",
    ),
)

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PostgresDestinationConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.postgres-destination]`` table. Unknown keys are errors."""

    dsn: str | None = None
    dsn_env: str | None = None
    schema: str = "hostcore"


def destination_for(host: Host) -> PostgresDestination:
    """The destination ``host``'s configuration describes (not yet connected)."""
    config = host.plugin_config(PLUGIN_NAME, PostgresDestinationConfig)
    table = f"[plugins.{PLUGIN_NAME}]"
    if config.dsn is not None and config.dsn_env is not None:
        raise ConfigError(f"{table}: set dsn or dsn_env, not both")
    if not _SCHEMA.match(config.schema):
        raise ConfigError(f"{table} schema {config.schema!r}: expected a lowercase SQL "
                          "identifier (letters, digits and _)")
    dsn, unavailable = config.dsn, None
    if config.dsn_env is not None:
        if not _ENV_NAME.match(config.dsn_env):
            raise ConfigError(f"{table} dsn_env {config.dsn_env!r}: expected the name of an "
                              "environment variable")
        dsn = host.env.get(config.dsn_env)
        if dsn is None:
            unavailable = (f"the variable {config.dsn_env} that {table} dsn_env names is "
                           "not set")
    destination = PostgresDestination(dsn, schema=config.schema, unavailable=unavailable,
                                      emit=host.emit)
    host.on_close(destination.close)
    return destination


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_destinations(host: Host) -> PostgresDestination:
    return destination_for(host)


@hookimpl
def hostcore_published_ref(stream: str, host: Host, destination: object) -> Ref | None:
    """The ref the database publishes for this host's store, when ``destination`` is
    this plugin's (another destination answers for itself)."""
    if not isinstance(destination, PostgresDestination):
        return None
    return destination.published(stream, host.store.instance_id)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # Loaded only when a plugin command is looked up: click's group and the
    # command's imports stay out of building a host.
    from hostcore_postgres.commands import postgres_group

    cli.add_command(postgres_group)
