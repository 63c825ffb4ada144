"""Helpers of the engine and store tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg

from reginamq.store.database import Database
from reginamq.store.schema import apply_schema


@contextlib.asynccontextmanager
async def member_databases(database_url: str, count: int) -> AsyncIterator[list[str]]:
    """``count`` new databases on the session's PostgreSQL, schema applied, dropped afterwards
    (with whatever is still prepared in them rolled back): members of a deployment of their own."""
    names = [f"member_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    urls = [urlsplit(database_url)._replace(path="/" + name).geturl() for name in names]
    admin = await asyncpg.connect(database_url)
    try:
        for name in names:
            await admin.execute(f'CREATE DATABASE "{name}"')
        for url in urls:
            await apply_schema(url)
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
