"""The asyncpg pool and the schema.

The schema is a folder of numbered ``.sql`` files, each idempotent, applied in order inside
one transaction holding an advisory lock, so several brokers starting at once against one
database apply it one at a time and never see half of it. A digest of the files is kept in
the database: a broker whose files match it changes nothing, so restarting one node never
disturbs the others; new files (an upgrade) redefine every function (000_functions.sql).
"""

from __future__ import annotations

import hashlib
import logging
from importlib import resources

import asyncpg

log = logging.getLogger("reginamq.store")

SCHEMA_LOCK_KEY = 0x5245_4749_4E41  # "REGINA"


def schema_files() -> list[tuple[str, str]]:
    folder = resources.files("reginamq.store") / "sql"
    files = sorted(f for f in folder.iterdir() if f.name.endswith(".sql"))
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


STATE_SQL = """
CREATE TABLE IF NOT EXISTS rq_schema_state (
    id int PRIMARY KEY CHECK (id = 1), digest text NOT NULL, applied_at timestamptz NOT NULL
)
"""


def schema_digest(files: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for name, sql in files:
        digest.update(name.encode() + b"\0" + sql.encode() + b"\0")
    return digest.hexdigest()


async def apply_schema(dsn: str) -> bool:
    """Bring the database to this version's schema; returns whether anything was applied."""
    files = schema_files()
    digest = schema_digest(files)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
            await conn.execute(STATE_SQL)
            if await conn.fetchval("SELECT digest FROM rq_schema_state WHERE id = 1") == digest:
                return False
            for name, sql in files:
                log.debug("applying %s", name)
                await conn.execute(sql)
            await conn.execute(
                "INSERT INTO rq_schema_state VALUES (1, $1, now()) "
                "ON CONFLICT (id) DO UPDATE SET digest = EXCLUDED.digest, applied_at = now()", digest)
            log.info("database schema applied (%s)", digest[:12])
            return True
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
