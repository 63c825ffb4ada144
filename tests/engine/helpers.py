"""Helpers of the engine and store tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import msgspec
import orjson

from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.push import NEW_QUEUE_OPTIONS, PushItem, pairs, prepare
from reginamq.store.database import Database
from reginamq.store.members import Deployment
from reginamq.store.schema import apply_schema
from reginamq.store.sharded import ShardedStore
from reginamq.store.sharded_messages import ShardedMessages

# The session database's URL → a database with the schema applied and nothing else, which new
# member databases are copied from (tests/engine/conftest.py drops it at the end).
TEMPLATES: dict[str, str] = {}


def url_of(database_url: str, name: str) -> str:
    return urlsplit(database_url)._replace(path="/" + name).geturl()


async def _template(admin: asyncpg.Connection, database_url: str) -> str:
    if database_url not in TEMPLATES:
        name = f"member_template_{uuid.uuid4().hex[:10]}"
        await admin.execute(f'CREATE DATABASE "{name}"')
        await apply_schema(url_of(database_url, name))
        TEMPLATES[database_url] = name
    return TEMPLATES[database_url]


@contextlib.asynccontextmanager
async def member_databases(database_url: str, count: int) -> AsyncIterator[list[str]]:
    """``count`` new databases on the session's PostgreSQL, schema applied (copied from a
    template, each with an id of its own, as a database the schema was applied to mints), dropped
    afterwards (with whatever is still prepared in them rolled back): members of a deployment of
    their own."""
    names = [f"member_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    urls = [url_of(database_url, name) for name in names]
    admin = await asyncpg.connect(database_url)
    try:
        template = await _template(admin, database_url)
        for name, url in zip(names, urls, strict=True):
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            conn = await asyncpg.connect(url)
            try:
                await conn.execute("UPDATE rq_member_self SET id = gen_random_uuid()")
            finally:
                await conn.close()
        yield urls
    finally:
        for name, url in zip(names, urls, strict=True):
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                conn = await asyncpg.connect(url)
                try:
                    for row in await conn.fetch(
                            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"):
                        await conn.execute(f"ROLLBACK PREPARED '{row['gid']}'")
                finally:
                    await conn.close()
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()

@contextlib.asynccontextmanager
async def opened(urls: list[str]) -> AsyncIterator[list[Database]]:
    """A pool on each of ``urls``, closed afterwards."""
    databases = [Database(url, 4) for url in urls]
    for database in databases:
        await database.open()
    try:
        yield databases
    finally:
        for database in databases:
            await database.close()


async def leave_prepared(url: str, name: str, statement: str, *args: object) -> None:
    """What a coordinator killed after its prepare leaves in a database: ``statement`` run in a
    transaction prepared as ``name``, whose connection is gone."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("BEGIN")
        await conn.execute(statement, *args)
        await conn.execute(f"PREPARE TRANSACTION '{name}'")
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def sharded(database_url: str) -> AsyncIterator[tuple[Deployment, ShardedStore]]:
    """A deployment of three new member databases, and its store."""
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        store = ShardedStore(databases)
        yield await store.join(), store


async def push(messages: ShardedMessages, items: list[tuple[str, str, str]]) -> dict[int, str]:
    """Pushes (queue, partition, transactionId) items; answers {item: original id} of duplicates."""
    rows = await messages.push(*columns(items))
    return {row[0]: row[1] for row in rows if row[0] is not None}


def columns(items: list[tuple[str, str, str]]) -> tuple:
    """A push's arguments for (queue, partition, transactionId) items, as the engine makes them."""
    prepared = prepare([PushItem(queue=queue, partition=partition, transactionId=txid,
                                 payload=msgspec.Raw(orjson.dumps({"txid": txid})))
                        for queue, partition, txid in items])
    queues, partitions, groups = pairs(prepared)
    return (queues, partitions, groups, prepared.txids, prepared.message_ids, prepared.fragments,
            NEW_QUEUE_OPTIONS, True)


async def pop(messages: ShardedMessages, queue: str, partition: str | None = None, batch: int = 10,
              group: str = QUEUE_MODE, hints: list[str] | None = None, mode: str = "all", partitions: int = 1):
    """One pop (subscription ``mode`` for a named group's first); answers (lease id,
    [(partition id, partition name, transactionId)], trailer)."""
    lease_id = str(uuid.uuid4())
    rows = await messages.pop(queue, partition, None, None, group, batch, partitions, False, 30, lease_id, mode, None,
                              None, None, True, hints or [], None, True, None, False)
    trailer = rows.pop() if rows and rows[-1][1] is None else None
    delivered = [(row[1], row[2], orjson.loads(b"{" + fragment + b"}")["transactionId"])
                 for row in rows for fragment in row[5]]
    return lease_id, delivered, trailer


async def ack(messages: ShardedMessages, lease_id: str, delivered, group: str = QUEUE_MODE):
    count = len(delivered)
    return await messages.ack([group] * count, [partition_id for partition_id, _, _ in delivered],
                              [txid for _, _, txid in delivered], [lease_id] * count, ["completed"] * count,
                              [None] * count)
