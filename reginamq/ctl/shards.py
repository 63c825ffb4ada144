"""``reginamq shards``: changes to the member databases of a running deployment
(docs/shards.md, "Adding a member"; docs/operations.md, "Several databases").

``shards add`` talks to the databases, not to a broker: it applies the schema to the new
database and adds it in one two-phase transaction over every member (store/members.py,
:func:`~reginamq.store.members.admit`). Brokers that were given the new database's URL serve it
within one maintenance round; nothing that exists moves.
"""

from __future__ import annotations

import asyncio

import click

from reginamq.common.errors import Unavailable
from reginamq.store.database import Database
from reginamq.store.members import Member, admit
from reginamq.store.schema import DatabaseUnusable, apply_schema


@click.group()
def shards() -> None:
    """Change the member databases of a deployment (docs/shards.md)."""


@shards.command()
@click.argument("new_url", metavar="URL")
@click.option("--database-url", "database_urls", multiple=True, required=True, metavar="URL",
              envvar="REGINAMQ_DATABASE_URL",
              help="A member database of the deployment: give every member, as to `reginamq serve` "
                   "(REGINAMQ_DATABASE_URL holds them space-separated).")
def add(new_url: str, database_urls: tuple[str, ...]) -> None:
    """Add the database at URL to the deployment as a new member.

    URL must be a database holding no queue, with max_prepared_transactions > 0. Give it to
    every broker first (`--database-url` once more, then a restart): a broker serves the new
    member within one maintenance round once this command has added it. New partitions then
    take their share of the new member; existing ones stay where they are."""
    urls = [url for given in database_urls for url in given.split()]
    try:
        member = asyncio.run(_add(urls, new_url))
    except (DatabaseUnusable, Unavailable) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"added member {member.ordinal} ({member.id}); brokers given its URL serve it within one "
               "maintenance round")


async def _add(urls: list[str], new_url: str) -> Member:
    await apply_schema(new_url)
    databases = [Database(url, 2) for url in urls]
    new = Database(new_url, 2)
    try:
        for database in (*databases, new):
            await database.open()
        return await admit(databases, new)
    finally:
        for database in (*databases, new):
            await database.close()
