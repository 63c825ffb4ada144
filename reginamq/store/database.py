"""The database a broker process talks to: its connection pool, and the one place where a
database failure gets its meaning for the client.

Every statement of the store runs through :meth:`Database.run` (one statement, or a whole
unit of work on one connection). What a failure means is decided there and nowhere else:

- a deadlock or serialization failure is retried: the statement (or the unit of work) was
  rolled back as a whole, so running it again is safe; after three attempts it is a 503;
- a lost, refused or overloaded connection, a timeout, a full disk or a read-only database is
  :class:`Unavailable` (a 503 the client may retry; a push is spooled), and a connection in an
  unknown state is terminated, never handed to the next request;
- a value PostgreSQL refused (``DataError``) is :class:`BadRequest` (a 400).

It is also where a process notices that its database went away and came back, and says so once
each way (:class:`Reachability`). Nothing above the store sees a connection or an asyncpg
exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import asyncpg

from reginamq.common.errors import BadRequest, Unavailable

log = logging.getLogger("reginamq.broker")

T = TypeVar("T")
RETRIES = 3
# The connection itself may be unusable after these: it is terminated, never reused.
_BROKEN_CONNECTION = (OSError, asyncpg.InterfaceError, asyncpg.InternalClientError,
                      asyncpg.PostgresConnectionError, asyncpg.AdminShutdownError)
# The database cannot take this request now (a 503 the client may retry; a push is spooled).
UNAVAILABLE = (
    *_BROKEN_CONNECTION,
    asyncio.TimeoutError,
    asyncpg.CannotConnectNowError,
    asyncpg.QueryCanceledError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InsufficientResourcesError,  # includes a full disk
    asyncpg.ReadOnlySQLTransactionError,  # a standby, or a database switched to read-only
)
RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
# asyncpg's pool logs each failed attempt to reopen its minimum of connections, with a traceback.
_POOL_RECONNECT = "Failed to restore the pool connection floor"

Connection = asyncpg.Connection
Row = asyncpg.Record


class Reachability:
    """Whether this process reaches its database, logged once a change: a warning when it goes
    (with the first error), and one when a call succeeds again (how long it was away and how
    many requests were answered 503 meanwhile). Every request that fails in between only counts."""

    def __init__(self) -> None:
        self.lost_at: float | None = None
        self.refused = 0

    def lost(self, error: BaseException | None) -> None:
        if self.lost_at is not None:
            return
        self.lost_at, self.refused = time.monotonic(), 0
        log.warning("database unavailable in process %d (%s): requests that need it are answered 503 and "
                    "pushes are spooled on disk until it is back", os.getpid(),
                    (str(error) or type(error).__name__) if error is not None else "no connection")

    def back(self) -> None:
        if self.lost_at is None:
            return
        log.warning("database available again in process %d after %.1f s; %d request(s) were answered 503 "
                    "meanwhile", os.getpid(), time.monotonic() - self.lost_at, self.refused)
        self.lost_at = None

    def refuse(self) -> None:
        """A request was answered 503."""
        if self.lost_at is not None:
            self.refused += 1


class _PoolReconnects(logging.Filter):
    """Turns asyncpg's warning for each failed reconnect of the pool into news of the outage."""

    def __init__(self, reachability: Reachability):
        super().__init__()
        self._reachability = reachability

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_POOL_RECONNECT):
            return True
        self._reachability.lost(record.exc_info[1] if record.exc_info else None)
        return False


class Executor(Protocol):
    """Where a statement of the store runs: the pool (:class:`Database`, each statement on its
    own) or one transaction (:class:`Session`, inside :meth:`Database.atomically`)."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...
    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...
    async def fetchval(self, sql: str, *args: Any) -> Any: ...
    async def execute(self, sql: str, *args: Any) -> str: ...
    async def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None: ...


class Family:
    """One table family of the store (store/__init__.py): its calls run on ``executor``, the
    pool or one transaction."""

    __slots__ = ("_db",)

    def __init__(self, executor: Executor):
        self._db = executor


class Session:
    """One connection inside one transaction: the statements of a unit of work
    (:meth:`Database.atomically`). Its methods are asyncpg's, minus the retries: a failure
    fails the whole unit, which the database then retries or maps as a whole."""

    __slots__ = ("_conn", "deferred")

    def __init__(self, conn: Connection, defers_notices: bool = False):
        self._conn = conn
        # The notices of a transaction that will be prepared (store/two_phase.py), which may
        # not notify: (channel, notices) to send once it is committed.
        self.deferred: list[tuple[str, list[str]]] | None = [] if defers_notices else None

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return await self._conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        return await self._conn.execute(sql, *args)

    async def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, args)


async def retried(attempt: Callable[[], Awaitable[T]],
                  retryable: tuple[type[BaseException], ...] = RETRYABLE) -> T:
    """``attempt()``, tried again after a deadlock or serialization failure (``retryable``: the
    database rolled it back whole, so running it again is safe); after :data:`RETRIES` attempts,
    a 503. The pause before each new attempt is random, so that two attempts that failed each
    other do not meet again in step."""
    for number in range(RETRIES):
        try:
            return await attempt()
        except retryable:
            if number == RETRIES - 1:
                raise Unavailable("the database kept aborting this request; retry") from None
            await asyncio.sleep(random.uniform(0.005, 0.05) * (number + 1))
    raise AssertionError("unreachable")


class Database:
    """The pool of one broker process, opened by :meth:`open` and closed by :meth:`close`.

    ``fetch``/``fetchrow``/``fetchval``/``execute``/``executemany`` run one statement on a
    pooled connection, with the failure mapping of the module header. :meth:`atomically` runs a
    unit of work in one transaction on one connection, retried as a whole.
    """

    def __init__(self, dsn: str, size: int):
        self.dsn = dsn
        self.size = size
        self.pool: asyncpg.Pool | None = None
        self.reachability = Reachability()
        self._pool_reconnects = _PoolReconnects(self.reachability)

    async def open(self) -> None:
        logging.getLogger("asyncpg.pool").addFilter(self._pool_reconnects)
        try:
            self.pool = await _create_pool(self.dsn, self.size)
        except UNAVAILABLE as error:
            # A worker (re)started while the database is away serves all the same (spooling pushes,
            # answering 503): its connections open once the database answers again.
            self.reachability.lost(error)
            self.pool = await _create_pool(self.dsn, self.size, warm=0)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        logging.getLogger("asyncpg.pool").removeFilter(self._pool_reconnects)

    def pool_sizes(self) -> tuple[int, int, int]:
        """(open, idle, most) connections of this process's pool."""
        if self.pool is None:
            return 0, 0, 0
        return self.pool.get_size(), self.pool.get_idle_size(), self.pool.get_max_size()

    async def run(self, call: Callable[[Connection], Awaitable[T]]) -> T:
        """``call`` with a pooled connection, under the failure mapping of the module header."""

        async def attempt() -> T:
            async with self.holding() as conn:
                return await call(conn)

        return await retried(attempt)

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[Connection]:
        """A pooled connection for as long as the holder needs it (one call, or the steps of a
        two-phase commit), under the failure mapping of the module header but without its
        retries: a deadlock or serialization failure (:data:`RETRYABLE`) is raised as it is,
        for the holder to undo and retry (:func:`retried`). A connection left in an unknown
        state is terminated, never handed to the next request; one goes back to the pool outside
        any transaction. Whether the database is reachable is noted here, both ways."""
        if self.pool is None:
            raise Unavailable("the broker is not connected to its database")
        try:
            async with self.pool.acquire(timeout=10) as conn:
                try:
                    yield conn
                except _BROKEN_CONNECTION:
                    conn.terminate()
                    raise
        except UNAVAILABLE as error:
            self.reachability.lost(error)
            raise Unavailable("database unavailable") from error
        except asyncpg.DataError as error:
            raise BadRequest(f"invalid value: {error}") from error
        if self.reachability.lost_at is not None:
            self.reachability.back()

    async def atomically(self, work: Callable[[Session], Awaitable[T]]) -> T:
        """``work`` in one transaction on one connection: all of it is committed, or none."""

        async def unit(conn: Connection) -> T:
            async with conn.transaction():
                return await work(Session(conn))

        return await self.run(unit)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return await self.run(lambda conn: conn.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self.run(lambda conn: conn.fetchrow(sql, *args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self.run(lambda conn: conn.fetchval(sql, *args))

    async def execute(self, sql: str, *args: Any) -> str:
        return await self.run(lambda conn: conn.execute(sql, *args))

    async def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        await self.run(lambda conn: conn.executemany(sql, args))

    async def healthy(self) -> bool:
        try:
            await self.fetchval("SELECT 1")
            return True
        except Unavailable:
            return False


async def _reset(conn: asyncpg.Connection) -> None:
    """Cheaper than asyncpg's default reset, which costs a round trip per request.

    The broker sets no session state, takes only transaction-scoped advisory locks and LISTENs
    on its own dedicated connection, so the only thing to undo is a transaction a cancelled
    request may have left open.
    """
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def _create_pool(dsn: str, size: int, warm: int = 2) -> asyncpg.Pool:
    """A pool of up to ``size`` connections, ``warm`` of them opened now and kept open."""
    return await asyncpg.create_pool(
        dsn,
        min_size=min(warm, size),
        max_size=size,
        command_timeout=60,
        max_inactive_connection_lifetime=300,
        reset=_reset,
        server_settings={"application_name": "reginamq"},
    )
