"""Ephemeral queues (019_ephemeral.sql): rings of messages in UNLOGGED tables, a cursor per
consumer group and ring, a lease per message handed out, and the durable declarations.

The contents are written without the write-ahead log and emptied by a database crash: that is
the class's contract. A ring is one (queue, partition), created by naming it; its row lock
orders the pushes, and its ``epoch`` names this incarnation (a reset, a delete or a crash makes
a new one). ``defaults`` is the options in force where a queue declares none, as JSON text.
"""

from __future__ import annotations

from reginamq.store.database import Family, Row

PUSH_SQL = "SELECT rq_eph_push($1, $2, $3, $4, $5::jsonb)"
POP_SQL = "SELECT rq_eph_pop($1, $2, $3, $4, $5, $6::jsonb)"
ACK_SQL = "SELECT rq_eph_ack($1, $2, $3, $4::uuid[], $5, $6)"
RESET_SQL = "SELECT rq_eph_reset($1)"
DEPTH_SQL = "SELECT rq_eph_depth($1, $2, $3::jsonb)"
LIST_SQL = "SELECT rq_eph_list($1::jsonb)"
DECLARE_SQL = ("INSERT INTO rq_eph_declared (queue, options) VALUES ($1, $2::jsonb) ON CONFLICT (queue) DO UPDATE "
               "SET options = EXCLUDED.options, updated_at = now() RETURNING options::text")
DELETE_SQL = "SELECT deleted, declared FROM rq_eph_delete($1)"


class Ephemeral(Family):
    async def push(self, queue: str, partition: str, payloads: list[str], sizes: list[int], defaults: str) -> int:
        """Appends ``payloads`` (JSON texts of ``sizes`` bytes) to the ring, all or none, and
        answers how many; over the queue's bounds the policy ``reject`` refuses them all
        (answers a negative number, nothing changed) and ``dropOldest`` drops the oldest
        messages to make room (a request larger than the bounds is refused either way)."""
        return await self._db.fetchval(PUSH_SQL, queue, partition, payloads, sizes, defaults)

    async def pop(self, queue: str, partition: str | None, group: str, batch: int, auto_ack: bool,
                  defaults: str) -> str:
        """Hands ``group`` up to ``batch`` messages of the queue (of ``partition``, or of the rings
        with the oldest waiting messages first, skipping one another consumer of the group is
        serving): first those due again, then new ones in push order; each leased unless
        ``auto_ack``, and one past its deliveries dropped instead. Answers JSON text
        ``{messages: [{epoch, seq, partition, attempts, payload}], oldest, windowMs, windowCount}``
        (``oldest``: when the oldest message handed out was pushed)."""
        return await self._db.fetchval(POP_SQL, queue, partition, group, batch, auto_ack, defaults)

    async def ack(self, queue: str, group: str, partitions: list[str], epochs: list[str], seqs: list[int],
                  done: list[bool]) -> list[str]:
        """Settles ``group``'s leases on the messages (``partitions[i]``, ``epochs[i]``,
        ``seqs[i]``): done releases the message, not done makes it due again at once. One outcome
        per message, in order: ``acked``, ``redelivered``, ``stale`` (another incarnation of the
        ring, or none) or ``unknown`` (no lease of this group on it)."""
        return await self._db.fetchval(ACK_SQL, queue, group, partitions, epochs, seqs, done)

    async def declare(self, queue: str, options: str) -> str:
        """Stores ``options`` (JSON text) as the queue's declaration, replacing any earlier one;
        answers the stored options as JSON text. A declaration is durable."""
        return await self._db.fetchval(DECLARE_SQL, queue, options)

    async def reset(self, queue: str) -> int:
        """Drops the queue's messages, leases and cursors (its declaration stays); answers how
        many messages were dropped, 0 for a queue that is not there."""
        return await self._db.fetchval(RESET_SQL, queue)

    async def delete(self, queue: str) -> Row:
        """Drops the queue's contents and its declaration; the row says whether there was
        anything (``deleted``) and whether it was declared (``declared``)."""
        row = await self._db.fetchrow(DELETE_SQL, queue)
        assert row is not None  # the function answers one row on every path
        return row

    async def depth(self, queue: str, group: str | None, defaults: str) -> str | None:
        """The queue's figures (of ``group``'s view when given) as JSON text, or None when it is
        neither declared nor holds a ring or a cursor."""
        return await self._db.fetchval(DEPTH_SQL, queue, group, defaults)

    async def listing(self, defaults: str) -> str:
        """Every ephemeral queue (declared, or holding a ring or a cursor) as JSON text."""
        return await self._db.fetchval(LIST_SQL, defaults)
