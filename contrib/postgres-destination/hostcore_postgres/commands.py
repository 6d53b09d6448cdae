"""``hostcore postgres migrate``: create or migrate the destination's schema.

Run as the database owner. It works whether or not this host has anything to
push (a push never migrates an existing schema: see :mod:`hostcore_postgres.schema`),
and is safe to run again, or on several hosts at once (one migrates, the others
find it done). Exit 1 with one line when the database refuses.

Keys of ``--json``: ``schema``, ``found`` (the version found, 0 for none),
``version`` (the version it holds now), ``migrated`` (whether this run changed it),
``prices_refreshed`` (the prices it brought to hostcore's shipped table, at any version).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.errors import PostgresDestinationError

if TYPE_CHECKING:
    from hostcore.host import Host


@click.group("postgres")
def postgres_group() -> None:
    """The PostgreSQL export destination (hostcore-postgres)."""


@postgres_group.command("migrate")
@json_option
@pass_host
def migrate_command(host: Host, as_json: bool) -> None:
    """Create the destination's schema, or migrate it to this package's version.

    Run it as the database owner, once per upgrade (docs/fleet.md gives the order
    for a fleet); it needs nothing to push. A schema already this new, or newer and
    still admitting this writer, is left as it is. Exit 1 when the database refuses
    (the line says why; a failed migration is rolled back whole).

    Keys of --json: schema, found, version, migrated, prices_refreshed.
    """
    # The one the plugin registered on this host, configured as every export sees it.
    destination = next(d for d in host.destinations if isinstance(d, PostgresDestination))
    reason = destination.availability()
    if reason is not None:
        click.echo(f"hostcore postgres migrate: {reason}", err=True)
        raise SystemExit(1)
    try:
        found, now = destination.migrate()
    except PostgresDestinationError as exc:
        click.echo(f"hostcore postgres migrate: {exc}", err=True)
        raise SystemExit(1) from None
    prices = destination.prices_refreshed
    if as_json:
        emit_json({"schema": destination.schema, "found": found, "version": now,
                   "migrated": found != now, "prices_refreshed": prices})
    elif found == now and not prices:
        click.echo(f"the {destination.schema} schema is at version {now}; nothing to migrate")
    elif found == now:
        click.echo(f"the {destination.schema} schema is at version {now}; refreshed {prices} "
                   "price(s) from the shipped table")
    else:
        click.echo(f"migrated the {destination.schema} schema from version {found} to {now}")
