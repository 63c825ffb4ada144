"""The asyncpg pool and the schema.

The schema is a folder of numbered ``.sql`` files, each idempotent, applied in order at every
start inside one transaction holding an advisory lock, so several brokers starting at once
against one database apply it exactly once at a time and never see half of it.
"""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger("reginamq.store")

SCHEMA_LOCK_KEY = 0x5245_4749_4E41  # "REGINA"


def schema_files() -> list[tuple[str, str]]:
    folder = resources.files("reginamq.store") / "sql"
    files = sorted(f for f in folder.iterdir() if f.name.endswith(".sql"))
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


async def apply_schema(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
            for name, sql in schema_files():
                log.debug("applying %s", name)
                await conn.execute(sql)
    finally:
        await conn.close()


async def _reset(conn: asyncpg.Connection) -> None:
    """Cheaper than asyncpg's default reset, which costs a round trip per request.

    The broker sets no session state, takes only transaction-scoped advisory locks and LISTENs
    on its own dedicated connection, so the only thing to undo is a transaction a cancelled
    request may have left open.
    """
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def create_pool(dsn: str, size: int) -> asyncpg.Pool:
    return await asyncpg.create_pool(
        dsn,
        min_size=min(2, size),
        max_size=size,
        command_timeout=60,
        max_inactive_connection_lifetime=300,
        reset=_reset,
        server_settings={"application_name": "reginamq"},
    )
