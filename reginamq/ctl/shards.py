"""``reginamq shards``: changes to the member databases of a running deployment
(docs/shards.md, "Adding a member" and "Rebalancing"; docs/operations.md, "Several databases").

Both commands talk to the databases, not to a broker. ``shards add`` applies the schema to the
new database and adds it in one two-phase transaction over every member (store/members.py,
:func:`~reginamq.store.members.admit`). Brokers that were given the new database's URL serve it
within one maintenance round; nothing that exists moves. ``shards rebalance`` moves idle
partitions to the members placement names for them, a batch at a time, each batch in one
two-phase transaction (store/rebalance.py); brokers follow within one maintenance round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import click

from reginamq.common.errors import Unavailable
from reginamq.config import SettingError, shard_file_urls
from reginamq.store.database import Database
from reginamq.store.members import Member, admit
from reginamq.store.rebalance import DEFAULT_BATCH, DEFAULT_IDLE_SECONDS, Rebalanced
from reginamq.store.rebalance import rebalance as rebalance_members
from reginamq.store.schema import DatabaseUnusable, apply_schema


@click.group()
def shards() -> None:
    """Change the member databases of a deployment (docs/shards.md)."""


def members(command: Callable[..., None]) -> Callable[..., None]:
    """The options that give the deployment's member databases, as `reginamq serve` takes them."""
    command = click.option(
        "--shard-file", type=click.Path(dir_okay=False, path_type=Path), default=None, envvar="REGINAMQ_SHARD_FILE",
        help="A file listing every member database, one URL a line, as `reginamq serve --shard-file` reads it "
             "(also REGINAMQ_SHARD_FILE).")(command)
    return click.option(
        "--database-url", "database_urls", multiple=True, metavar="URL", envvar="REGINAMQ_DATABASE_URL",
        help="A member database of the deployment: give every member, as to `reginamq serve` "
             "(REGINAMQ_DATABASE_URL holds them space-separated).")(command)


def _urls(database_urls: tuple[str, ...], shard_file: Path | None) -> list[str]:
    urls = [url for given in database_urls for url in given.split()]
    if shard_file is None:
        if not urls:
            raise click.UsageError("give every member database with --database-url, or --shard-file")
        return urls
    if urls:
        raise click.UsageError("give the member databases with --database-url or in --shard-file, not both")
    try:
        return shard_file_urls(shard_file)
    except SettingError as error:
        raise click.UsageError(str(error)) from None


@shards.command()
@click.argument("new_url", metavar="URL")
@members
def add(new_url: str, database_urls: tuple[str, ...], shard_file: Path | None) -> None:
    """Add the database at URL to the deployment as a new member.

    URL must be a database holding no queue, with max_prepared_transactions > 0. Give it to
    every broker first (`--database-url` once more, then a restart): a broker serves the new
    member within one maintenance round once this command has added it. New partitions then
    take their share of the new member; existing ones stay where they are."""
    try:
        member = asyncio.run(_add(_urls(database_urls, shard_file), new_url))
    except (DatabaseUnusable, Unavailable) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"added member {member.ordinal} ({member.id}); brokers given its URL serve it within one "
               "maintenance round")


@contextlib.asynccontextmanager
async def _opened(urls: list[str], size: int) -> AsyncIterator[list[Database]]:
    """A pool of ``size`` connections on each of ``urls``, closed afterwards."""
    databases = [Database(url, size) for url in urls]
    try:
        for database in databases:
            await database.open()
        yield databases
    finally:
        for database in databases:
            await database.close()


async def _add(urls: list[str], new_url: str) -> Member:
    await apply_schema(new_url)
    async with _opened([*urls, new_url], 2) as databases:
        return await admit(databases[:-1], databases[-1])


@shards.command()
@members
@click.option("--queue", default=None, help="Move partitions of this queue only (default: every queue).")
@click.option("--idle-seconds", type=click.FloatRange(min=0), default=DEFAULT_IDLE_SECONDS, show_default=True,
              help="A partition moves only if nothing was written to it for this long.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Move at most this many partitions (default: every one placement puts elsewhere).")
@click.option("--batch", type=click.IntRange(min=1, max=10_000), default=DEFAULT_BATCH, show_default=True,
              help="Partitions moved in one two-phase transaction.")
@click.option("--dry-run", is_flag=True, help="Say what would move, and move nothing.")
def rebalance(database_urls: tuple[str, ...], shard_file: Path | None, queue: str | None, idle_seconds: float,
              limit: int | None, batch: int, dry_run: bool) -> None:
    """Move idle partitions to the member databases placement names for them.

    After `shards add`, new partitions take their share of the new member but existing ones
    stay. This moves each idle partition (nothing written for --idle-seconds, no live lease,
    nothing unconsumed by a reader with a cursor on it) whose name placement puts on another
    member there, with its messages, cursors, dedup keys and dead letters. A partition that is
    busy stays, and a later run moves it. Brokers keep serving meanwhile."""
    try:
        done = asyncio.run(_rebalance(_urls(database_urls, shard_file), queue, idle_seconds, limit, batch, dry_run))
    except (DatabaseUnusable, Unavailable) as error:
        raise click.ClickException(str(error)) from None
    for (source, target), count in sorted(done.planned.items()):
        verb = "would move" if dry_run else f"moved {done.moved[source, target]} of"
        click.echo(f"member {source} -> member {target}: {verb} {count} idle partition(s)")
    if dry_run:
        click.echo(f"{sum(done.planned.values())} idle partition(s) would move; nothing moved (--dry-run)")
    else:
        click.echo(f"moved {sum(done.moved.values())} partition(s); {done.skipped} left in place (busy by their "
                   "turn: run again to move them)")


async def _rebalance(urls: list[str], queue: str | None, idle_seconds: float, limit: int | None, batch: int,
                     dry_run: bool) -> Rebalanced:
    async with _opened(urls, 3) as databases:
        return await rebalance_members(databases, queue, idle_seconds, limit, batch, dry_run, _Progress())


class _Progress:
    """Says how far a long rebalance is, every few seconds."""

    EVERY_SECONDS = 5.0

    def __init__(self) -> None:
        self._said_at = time.monotonic()

    def __call__(self, done: Rebalanced) -> None:
        if time.monotonic() - self._said_at >= self.EVERY_SECONDS:
            self._said_at = time.monotonic()
            click.echo(f"... moved {sum(done.moved.values())} of {sum(done.planned.values())} listed so far")
