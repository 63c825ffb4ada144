"""Messages and their leases: the push, pop and ack calls (002_push.sql, 003_pop.sql, 004_ack.sql).

Each call is one statement. A push's and an ack's notices (the partitions with work, for the
wake-ups and hints of engine/waiters.py and engine/hot_partitions.py) are announced on the connection
that made the write: after its commit when the call runs on its own, with the caller's commit
inside a transaction (see notices.py). One pooled connection carries the write and its
announcement, two statements in a row; between them the notices pass through the hook the
process registered (:meth:`Messages.announce_through`), which may act on them first.

Columns of names and UUIDs travel joined into one string each and are split in SQL
(columns.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import asyncpg
import orjson

from reginamq.common.errors import QueueFull, Unavailable
from reginamq.store.columns import join_names, join_uuids, split_names, split_optional_names, split_uuids
from reginamq.store.database import Connection, Database, Family, Row, Session
from reginamq.store.dedup_keys import join_buckets
from reginamq.store.notices import CHANNEL, notify_with_commit, send_after_commit

log = logging.getLogger("reginamq.store")

PUSH_SQL = ("SELECT item, original_id::text, notice FROM rq_push($1, $2, string_to_array($3, ',')::int[], "
            f"{split_names('$4')}, {split_optional_names('$5')}, {split_uuids('$6')}, $7, $8::jsonb, $9, "
            f"{split_uuids('$10')})")
QUEUE_FULL = "RQ409"  # raised by rq_push: the push would take queues past their maxSize
UNSEALED = "RQ428"  # raised by rq_push: a plaintext fragment for an encrypted queue
MOVED = "RQ410"  # raised by rq_push: a partition moved to another member database (021_moves.sql)
POP_SQL = (
    "SELECT queue_name, partition_id::text, partition_name, created_at, attempt, payloads, sweep_queue, sweep_name, "
    "swept, hints_left::text[], first_offset, conflating FROM rq_pop($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
    "$12, $13, $14, $15, $16, $17, $18, $19, $20)"
)
READY_SQL = "SELECT rq_pop_ready($1, $2, $3, $4, $5)"
ACK_SQL = ("SELECT item, success, error, lease_released, dlq, noop, notice, released FROM rq_ack("
           f"{split_names('$1')}, {split_uuids('$2')}, {split_names('$3')}, {split_uuids('$4')}, "
           f"{split_names('$5')}, $6)")
EXTEND_SQL = "SELECT renewed, expires_at FROM rq_extend_lease($1, $2)"
EXPIRE_SQL = "SELECT rq_expire_lease($1)"
LIVE_LEASES_SQL = (
    "SELECT DISTINCT lease_id::text FROM rq_consumers "
    "WHERE lease_id = ANY($1::uuid[]) AND span_end IS NOT NULL AND lease_expires_at > now()"
)
PARTITION_IDS_SQL = (
    "SELECT t.ord::int, p.id::text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(queue, partition, ord) "
    "JOIN rq_queues q ON q.name = t.queue JOIN rq_partitions p ON p.queue_id = q.id AND p.name = t.partition"
)
EXPIRED_SQL = "SELECT queue_name, consumer_group, partition_id::text FROM rq_expired_leases($1)"


class Unsealed(Exception):
    """rq_push refused a plaintext fragment for a queue that is encrypted: nothing was written.
    ``retry``: whether the same call may be made again once sealed; not inside a transaction,
    which the refusal aborted."""

    def __init__(self, retry: bool):
        super().__init__("a fragment for an encrypted queue came unsealed")
        self.retry = retry


class PartitionMoved(Unavailable):
    """rq_push met a partition that moved to another member database since the caller looked
    its name up: nothing was written, and the name is to be looked up again."""


class Messages(Family):
    __slots__ = ("_before_announcing",)

    def __init__(self, executor):
        super().__init__(executor)
        self._before_announcing: Callable[[list[str]], list[str]] | None = None

    def announce_through(self, hook: Callable[[list[str]], list[str]]) -> None:
        """Pass the notices of every push and ack made on the pool (not in a transaction) through
        ``hook`` once the write has committed: it gets them and returns the ones to send."""
        self._before_announcing = hook

    async def _announce_after_commit(self, conn: Connection, notices: list[str]) -> None:
        if notices and self._before_announcing is not None:
            notices = self._before_announcing(notices)
        await send_after_commit(conn, CHANNEL, notices)

    async def announce(self, notices: list[str]) -> None:
        """Announces ``notices`` of pushes and acks committed elsewhere (another member's, whose
        call did not announce): on a pooled connection, through the hook, as a push's own. What
        they announce is written, so a failure is logged, never raised."""
        if not notices:
            return
        try:
            await self._db.run(lambda conn: self._announce_after_commit(conn, notices))
        except Unavailable as error:
            log.warning("a notification on %s was not sent: %s", CHANNEL, error)

    async def push(self, queues: list[str], partitions: list[str], pairs: list[int], txids: list[str],
                   message_ids: list[str], fragments: list[bytes], new_queue_options: str,
                   enforce_max_size: bool, announce: bool = True,
                   listed_ids: list[str | None] | None = None) -> list[Row]:
        """Appends one message per fragment, all or none, and announces the partitions written
        (on the pool, unless ``announce`` is off: the caller announces the notice rows).

        ``queues``/``partitions`` are the distinct pairs of the push, ``pairs`` each message's
        pair (1-based); ``txids`` and ``message_ids`` one a message; queues that do not exist
        yet are created with ``new_queue_options`` (JSON), and partitions that do not exist yet
        with the pair's id in ``listed_ids`` (a member's, store/homes.py) or else of this
        database's own numbers. A message whose (queue, partition,
        transactionId) is already stored is not written again. Rows ``(item, original_id,
        notice)``: one per such duplicate (its index, the stored message's id), and the notices
        (``item`` NULL). Raises :class:`QueueFull` (nothing written) when a queue would pass its
        maxSize, unless ``enforce_max_size`` is off, and :class:`Unsealed` for a plaintext
        fragment bound for an encrypted queue."""
        arguments = (queues, partitions, ",".join(map(str, pairs)), join_names(txids), join_buckets(txids),
                     join_uuids(message_ids), fragments, new_queue_options, enforce_max_size,
                     None if listed_ids is None else join_uuids(listed_ids))
        if isinstance(self._db, Database):
            async def push_and_announce(conn: Connection) -> list[Row]:
                rows = await _push(conn, arguments, retry=True)
                if announce:
                    await self._announce_after_commit(conn, [row[2] for row in rows if row[2] is not None])
                return rows

            return await self._db.run(push_and_announce)
        rows = await _push(self._db, arguments, retry=False)
        await notify_with_commit(self._db, CHANNEL, [row[2] for row in rows if row[2] is not None])
        return rows

    async def pop(self, queue: str | None, partition: str | None, namespace: str | None, task: str | None,
                  group: str, batch: int, partitions: int, auto_ack: bool, lease_seconds: int, lease_id: str,
                  subscription_mode: str, subscription_from: datetime | None, sweep_queue: int | None,
                  sweep_name: str | None, may_sweep: bool, hints: list[str], since: datetime | None, scan: bool,
                  conflation: bool | None, report: bool) -> list[Row]:
        """Claims up to ``partitions`` partitions with work for ``group`` (of a queue, one
        partition, or a namespace/task selection) and leases their next messages, up to
        ``batch``, under ``lease_id`` (consumed at once with ``auto_ack``), atomically.

        The partitions are looked for in ``hints`` first, then (``scan``) among the recent
        writes, then by the backlog sweep from (``sweep_queue``, ``sweep_name``) when
        ``may_sweep``, over what was written before ``since``. A group's delivery policy is
        fixed at its first pop (``conflation`` asks for last-value delivery).

        Rows ``(queue_name, partition_id, partition_name, created_at, attempt, payloads,
        sweep_queue, sweep_name, swept, hints_left, first_offset, conflating)``: one per stored
        segment slice delivered, a partition's slices together in offset order; the last row
        carries where the sweep stopped and whether it found work (NULL: it did not sweep).
        When hints were left unchecked or ``report`` asks for the group's policy, that last row
        has no partition id and carries ``hints_left`` and ``conflating``. No rows: nothing to
        deliver and nothing to say."""
        return await self._db.fetch(POP_SQL, queue, partition, namespace, task, group, batch, partitions, auto_ack,
                                    lease_seconds, lease_id, subscription_mode, subscription_from, sweep_queue,
                                    sweep_name, may_sweep, hints, since, scan, conflation, report)

    async def pop_ready(self, queue: str, partition: str | None, group: str, partitions: int, batch: int) -> int:
        """How many messages a pop of ``group`` with these limits would get now (at most
        ``batch``), without leasing anything."""
        return await self._db.fetchval(READY_SQL, queue, partition, group, partitions, batch)

    async def ack(self, groups: list[str], partitions: list[str], txids: list[str], leases: list[str | None],
                  statuses: list[str], errors: list[str | None], announce: bool = True) -> list[Row]:
        """Applies the acknowledgements (one per index of the columns; status ``completed``,
        ``retry``, ``dlq`` or ``failed``) atomically, and announces the partitions that have
        work again (on the pool, unless ``announce`` is off: the caller announces the notice
        rows).

        Rows ``(item, success, error, lease_released, dlq, noop, notice, released)``: one per
        acknowledgement that went through the per-message rules (its index); one with
        ``released``, the count of the acknowledgements that completed and released whole
        leased spans (every acknowledgement without a row of its own); and the notices
        (``item`` and ``released`` NULL)."""
        no_errors = errors.count(None) == len(errors)  # unnest pads a shorter array with NULLs
        arguments = (join_names(groups), join_uuids(partitions), join_names(txids), join_uuids(leases),
                     join_names(statuses), [] if no_errors else errors)
        if isinstance(self._db, Database):
            async def ack_and_announce(conn: Connection) -> list[Row]:
                rows = await conn.fetch(ACK_SQL, *arguments)
                if announce:
                    await self._announce_after_commit(conn, [row[6] for row in rows if row[6] is not None])
                return rows

            return await self._db.run(ack_and_announce)
        rows = await self._db.fetch(ACK_SQL, *arguments)
        await notify_with_commit(self._db, CHANNEL, [row[6] for row in rows if row[6] is not None])
        return rows

    async def extend_lease(self, lease_id: str, seconds: int) -> Row:
        """Extends a live lease (every partition it covers) to ``seconds`` from now; never
        shortens it. ``(renewed, expires_at)``: how many partitions, and until when
        (``renewed`` 0 for an unknown or expired lease)."""
        return await self._db.fetchrow(EXTEND_SQL, lease_id, seconds)

    async def expire_lease(self, lease_id: str) -> int:
        """Ends a live lease now (every partition it covers): its messages go to the next pop, as
        after an expiry. How many partitions it covered (0: unknown, ended or acknowledged)."""
        return await self._db.fetchval(EXPIRE_SQL, lease_id)

    async def live_leases(self, lease_ids: list[str]) -> set[str]:
        """Which of ``lease_ids`` are live: still leasing a span, not expired."""
        return {row[0] for row in await self._db.fetch(LIVE_LEASES_SQL, lease_ids)}

    async def partition_ids(self, queues: list[str], partitions: list[str]) -> list[Row]:
        """``(position, partition id)`` of each (queue, partition) pair that exists, 1-based in
        the order given; a pair that does not exist has no row."""
        return await self._db.fetch(PARTITION_IDS_SQL, queues, partitions)

    async def expired_leases(self, limit: int) -> list[Row]:
        """``(queue_name, consumer_group, partition_id)`` of up to ``limit`` leases that have run
        out and still hold their span, the longest expired first."""
        return await self._db.fetch(EXPIRED_SQL, limit)


async def _push(db: Connection | Session, arguments: tuple, retry: bool) -> list[Row]:
    try:
        return await db.fetch(PUSH_SQL, *arguments)
    except asyncpg.PostgresError as error:
        if error.sqlstate == QUEUE_FULL:
            raise QueueFull(orjson.loads(error.detail)) from None
        if error.sqlstate == UNSEALED:
            raise Unsealed(retry) from None
        if error.sqlstate == MOVED:
            raise PartitionMoved(error.message) from None
        raise

