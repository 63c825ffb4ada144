"""Timers (rq_timers; 018_timers.sql): messages waiting under (queue, timer key) to enter their
queue, scheduled, rescheduled and cancelled op by op, and taken by the fire when they fall due.

A timer being delivered is held by the fire's transaction (``FOR UPDATE SKIP LOCKED``): an op
on it answers ``too_late``, and another fire skips it, so a timer is delivered once."""

from __future__ import annotations

from reginamq.store.database import Family, Row

APPLY_SQL = "SELECT rq_timers_apply($1::jsonb)"
PEEK_SQL = "SELECT rq_timer_peek($1, $2)"
LIST_SQL = "SELECT rq_timers_list($1, $2, $3)"
TAKE_SQL = "SELECT queue, timer_key, partition, payload, txn, message_id::text FROM rq_timers_take_due($1)"
BACK_OFF_SQL = "SELECT rq_timers_back_off($1, $2)"


class Timers(Family):
    async def apply(self, ops: str) -> str:
        """Applies ``ops`` (the JSON array of schedule/reschedule/cancel ops ``{i, op, queue, key,
        ...}``) in the order given, in one statement, and answers the JSON array of their results
        in that order. A schedule of a key that is pending reschedules it (new txn, payload and
        time, attempts back at 0); a verdict (``absent``, ``too_late``) is a result, not an error."""
        return await self._db.fetchval(APPLY_SQL, ops)

    async def peek(self, queue: str, key: str) -> str:
        """The pending timer as JSON text (with its base64 payload and ``found: true``), or
        ``{"found": false, queue, timerKey}``."""
        return await self._db.fetchval(PEEK_SQL, queue, key)

    async def page(self, queue: str, after: str | None, limit: int) -> str:
        """Up to ``limit`` of ``queue``'s pending timers in byte order of their keys after the
        exclusive cursor ``after``, as JSON text ``{queue, rows, truncated, nextAfter}``."""
        return await self._db.fetchval(LIST_SQL, queue, after, limit)

    async def take_due(self, limit: int) -> list[Row]:
        """Deletes and answers up to ``limit`` due timers, oldest first (``queue``, ``timer_key``,
        ``partition``, ``payload``, ``txn``, ``message_id``), skipping those another transaction
        holds. Run it inside :meth:`Store.atomically` with the push of their messages: a
        rollback puts them back."""
        return await self._db.fetch(TAKE_SQL, limit)

    async def back_off(self, queues: list[str], error: str) -> int:
        """The due timers of ``queues`` wait before their next try (1 s doubling up to a minute)
        with ``error`` kept as their ``lastError``; answers how many."""
        return await self._db.fetchval(BACK_OFF_SQL, queues, error)
