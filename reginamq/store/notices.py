"""Notifications between broker processes (PostgreSQL's LISTEN/NOTIFY): wake-ups, hints, syncs.

The store sends them and hears them; what they mean is the engine's (engine/waiters.py). They
are hints, never the truth: a lost one costs a waiter its back-off, never a message.

The channels are names in the database, also sent on by the plpgsql (a consumer group sought or
deleted, a queue configured):

- ``rq_push``: a queue, a newline and the partitions written (002_push.sql, 004_ack.sql), or
  the queue alone when something of it changed without naming its partitions;
- ``rq_config``: a queue was configured or deleted;
- ``rq_sync``: a process's own token, echoed back to it (engine/waiters.py, ``sync``);
- ``rq_ephemeral``: an ephemeral queue was pushed to or had a message put back.

PostgreSQL delivers notifications to a listener in commit order, and serialises every
committing transaction that notifies (one lock per database, held until the commit is done,
its flush to disk included): a notification committed with a durable write makes the next
notifier wait for that flush. So a write's notices go after its commit, in a statement of their
own with ``synchronous_commit`` off (they carry nothing that must survive a crash), on the
connection that made the write; inside a caller's transaction they go with its commit, since
they must not be heard before its writes are visible.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

import asyncpg

from reginamq.common.errors import Unavailable
from reginamq.store.database import UNAVAILABLE, Connection, Database, Executor, Family, Session

log = logging.getLogger("reginamq.notices")

CHANNEL = "rq_push"
CONFIG_CHANNEL = "rq_config"
SYNC_CHANNEL = "rq_sync"
EPHEMERAL_CHANNEL = "rq_ephemeral"

NOTIFY_SQL = "SELECT pg_notify($1, notice) FROM unnest($2::text[]) AS notice"
NOTIFY_UNFLUSHED_SQL = ("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, notice) "
                        "FROM unnest($2::text[]) AS notice")
# What may go wrong opening or setting up the listening connection: the database is away.
_CONNECT_FAILURES = (*UNAVAILABLE, asyncpg.PostgresError, asyncpg.InterfaceError)


async def send_after_commit(conn: Connection, channel: str, notices: list[str]) -> None:
    """``notices`` on ``channel``, on the connection whose write just committed, at once and
    without waiting for the disk. A failure is logged, never raised: what they announce is
    already written (a caller retrying would write it twice), and the connection, in an
    unknown state, is terminated so that the pool opens a fresh one."""
    if not notices:
        return
    try:
        await conn.execute(NOTIFY_UNFLUSHED_SQL, channel, notices)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        conn.terminate()
        log.warning("a notification on %s was not sent: %s", channel, error)


async def notify_with_commit(session: Session, channel: str, notices: list[str]) -> None:
    """``notices`` on ``channel``, delivered when ``session``'s transaction commits and not at
    all when it rolls back; a transaction that will be prepared keeps them for its coordinator
    to send once it is committed (PostgreSQL refuses to prepare one that notified)."""
    if not notices:
        return
    if session.deferred is not None:
        session.deferred.append((channel, notices))
    else:
        await session.execute(NOTIFY_SQL, channel, notices)


class Listener:
    """One connection LISTENing on some channels, open until :meth:`close` or until it is lost
    (then its ``on_lost`` was called)."""

    def __init__(self, conn: Connection):
        self._conn = conn

    @property
    def open(self) -> bool:
        return not self._conn.is_closed()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._conn.close()


class Notices(Family):
    async def announce(self, channel: str, notices: list[str]) -> None:
        """Send ``notices`` on ``channel`` for writes already made. In a transaction (a store of
        ``Store.atomically``) they go with its commit, and a failure fails the transaction;
        otherwise at once, without waiting for the disk, and a failure (the database away
        included) is logged, never raised (see :func:`send_after_commit`)."""
        if not notices:
            return
        if isinstance(self._db, Session):
            await notify_with_commit(self._db, channel, notices)
            return
        try:
            await _pool(self._db).run(lambda conn: send_after_commit(conn, channel, notices))
        except Unavailable as error:
            log.warning("a notification on %s was not sent: %s", channel, error)

    async def notify(self, channel: str, notices: list[str], sending: Callable[[], None],
                     catalog_only: bool = False) -> None:
        """Send ``notices`` on ``channel`` now, in a statement of its own, without waiting for the
        disk; raises :class:`Unavailable` when they could not be sent. ``sending`` is called
        with a connection in hand, just before the statement goes: a listener that hears these
        notices has heard every notification committed before that call. Not in a transaction
        (its notices would wait for its commit). ``catalog_only`` matters over several
        databases (sharded_notices.py); one database is its own catalog."""
        def send(conn: Connection):
            sending()
            return conn.execute(NOTIFY_UNFLUSHED_SQL, channel, notices)

        await _pool(self._db).run(send)

    async def listen(self, handlers: Mapping[str, Callable[[str], None]], on_lost: Callable[[], None]) -> Listener:
        """A connection of its own (not the pool's) LISTENing on each channel of ``handlers``,
        which get each notification's payload, in commit order. ``on_lost`` is called once the
        connection ends, closed or lost; the caller decides whether to listen again. Raises
        :class:`Unavailable` when the database cannot be reached or refuses the connection."""
        try:
            conn = await asyncpg.connect(_pool(self._db).dsn)
        except _CONNECT_FAILURES as error:
            raise Unavailable(f"cannot listen for notifications: {error}") from error
        try:
            conn.add_termination_listener(lambda _conn: on_lost())
            for channel, handler in handlers.items():
                await conn.add_listener(channel, lambda _conn, _pid, _channel, payload, handler=handler:
                                        handler(payload))
        except _CONNECT_FAILURES as error:
            conn.terminate()
            raise Unavailable(f"cannot listen for notifications: {error}") from error
        return Listener(conn)


def _pool(db: Executor) -> Database:
    if not isinstance(db, Database):
        raise TypeError("only the pool's store sends notifications at once or listens, not a transaction's")
    return db
