"""The schema: reginamq's tables and functions, brought to this version at start.

The schema is a folder of numbered ``.sql`` files, each idempotent, applied in order inside
one transaction holding an advisory lock, so several brokers starting at once against one
database apply it one at a time and never see half of it. A digest of the files is kept in
the database: a broker whose files match it changes nothing, so restarting one node never
disturbs the others; new files (an upgrade) redefine every function (000_functions.sql).

Applying the schema is the broker's first contact with its database: whatever keeps it from
using the database (the URL, the server, the login, the database's name, the server's version,
the user's rights) is raised as :class:`DatabaseUnusable`, one line saying what to check.
"""

from __future__ import annotations

import hashlib
import logging
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import asyncpg

log = logging.getLogger("reginamq.store")

SCHEMA_LOCK_KEY = 0x5245_4749_4E41  # "REGINA"
MIN_SERVER_VERSION = 15
CONNECT_TIMEOUT = 10.0


class DatabaseUnusable(Exception):
    """The broker cannot use its database; the message says why and what to check."""


def schema_files() -> list[tuple[str, str]]:
    folder = resources.files("reginamq.store") / "sql"
    files = sorted(f for f in folder.iterdir() if f.name.endswith(".sql"))
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


PAYLOAD_COMPRESSION_SQL = "SELECT rq_payload_compression($1)"
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


async def apply_schema(dsn: str, payload_compression: str = "auto") -> bool:
    """Bring the database to this version's schema, with new payloads stored as
    ``payload_compression`` says (auto, lz4, pglz or none: see rq_payload_compression); returns
    whether the schema was applied."""
    files = schema_files()
    digest = schema_digest(files)
    conn = await _connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
            await conn.execute(STATE_SQL)
            applied = await conn.fetchval("SELECT digest FROM rq_schema_state WHERE id = 1") != digest
            if applied:
                for name, sql in files:
                    log.debug("applying %s", name)
                    await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO rq_schema_state VALUES (1, $1, now()) "
                    "ON CONFLICT (id) DO UPDATE SET digest = EXCLUDED.digest, applied_at = now()", digest)
                log.info("database schema applied (%s)", digest[:12])
            method = await conn.fetchval(PAYLOAD_COMPRESSION_SQL, payload_compression)
            log.info("new payloads stored %s", "uncompressed" if method == "none" else f"compressed with {method}")
            return applied
    except asyncpg.FeatureNotSupportedError as error:
        raise DatabaseUnusable(f"payload compression on {where(dsn)}: {error}") from None
    except asyncpg.InsufficientPrivilegeError as error:
        raise DatabaseUnusable(f"the database user may not create reginamq's tables and functions on "
                               f"{where(dsn)} ({error}); grant it CREATE on the schema, or connect as the "
                               "database's owner") from None
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        raise DatabaseUnusable(f"applying reginamq's schema on {where(dsn)} failed: {error}") from None
    finally:
        await conn.close()


async def check_schema(dsn: str) -> None:
    """For a caller that does not apply the schema (it is managed elsewhere): refuse a database
    that does not hold this version's, before anything runs on it."""
    conn = await _connect(dsn)
    try:
        found = await conn.fetchval("SELECT digest FROM rq_schema_state WHERE id = 1")
    except asyncpg.UndefinedTableError:
        found = None
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        raise DatabaseUnusable(f"reading reginamq's schema version on {where(dsn)} failed: {error}") from None
    finally:
        await conn.close()
    if found != schema_digest(schema_files()):
        raise DatabaseUnusable(f"the database at {where(dsn)} does not hold this version's reginamq schema; "
                               "apply it (apply_schema=True, or `reginamq serve` on it once)")


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError) as error:
        raise DatabaseUnusable(f"PostgreSQL at {where(dsn)} refused the login ({error}); check the user "
                               "and password in --database-url") from None
    except asyncpg.InvalidCatalogNameError as error:
        raise DatabaseUnusable(f"{error} on PostgreSQL at {where(dsn)}; create it "
                               "(CREATE DATABASE) or name an existing one in --database-url") from None
    except asyncpg.PostgresError as error:
        raise DatabaseUnusable(f"PostgreSQL at {where(dsn)} refused the connection: {error}") from None
    except ValueError as error:  # asyncpg's ClientConfigurationError included
        raise DatabaseUnusable(f"the database URL cannot be used ({error}); check --database-url") from None
    except (OSError, TimeoutError, asyncpg.InterfaceError) as error:
        reason = f"no answer in {CONNECT_TIMEOUT:.0f} s" if isinstance(error, TimeoutError) else error
        raise DatabaseUnusable(f"cannot reach PostgreSQL at {where(dsn)} ({reason}); check the host and "
                               "port in --database-url, and that PostgreSQL runs there") from None
    version = conn.get_server_version()
    if version.major < MIN_SERVER_VERSION:
        await conn.close()
        raise DatabaseUnusable(f"reginamq needs PostgreSQL {MIN_SERVER_VERSION} or later; the server at "
                               f"{where(dsn)} runs {version.major}.{version.minor}")
    return conn


def where(dsn: str) -> str:
    """The server a URL names (host and port, or a Unix socket's folder), for messages: never
    its password."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    if "host" in query:
        return query["host"][0] + (f":{query['port'][0]}" if "port" in query else "")
    return parts.netloc.rpartition("@")[2] or "localhost"
