"""The timer fire: every process delivers due timers (engine/timers.py) as they fall due.

A round takes up to ``BATCH`` due timers, oldest first, deletes them and pushes their messages
through the ordinary push (deduplication, encryption, ``maxSize``, waking long polls) in one
transaction: a timer is delivered once or stays pending. Processes share the work without an
election, each skipping the rows another holds, so a due timer waits at most about
``INTERVAL`` seconds whichever processes are up. A push that is refused (a full queue, an
encrypted queue without the key) rolls the round back; the due timers of the refusing queues
then wait before their next try (1 s doubling to a minute, the refusal kept as ``lastError``),
and the others fire in the next round.
"""

from __future__ import annotations

import msgspec

from reginamq.common.errors import BadRequest, QueueFull
from reginamq.common.periodic import Periodic
from reginamq.engine import push as pushes

TAKE_SQL = "SELECT queue, timer_key, partition, payload, txn, message_id::text FROM rq_timers_take_due($1)"
BACK_OFF_SQL = "SELECT rq_timers_back_off($1, $2)"
BATCH = 1000
INTERVAL = 0.25


class TimerFire(Periodic):
    def __init__(self, run, sealer, interval: float = INTERVAL):
        super().__init__(interval, "timers")
        self._run = run
        self._sealer = sealer

    async def tick(self) -> None:
        while await self._run(self._fire) == BATCH:
            pass  # a full round: more may be due

    async def _fire(self, conn) -> int:
        """Deliver one round; how many timers it took (refused ones included)."""
        refused: tuple[list[str], str] | None = None
        rows: list = []
        try:
            async with conn.transaction():
                rows = await conn.fetch(TAKE_SQL, BATCH)
                if rows:
                    items = [pushes.PushItem(queue=row[0], partition=row[2], payload=msgspec.Raw(row[3]),
                                             transactionId=row[4]) for row in rows]
                    await pushes.execute(conn, pushes.prepare(items, None, [row[5] for row in rows]), self._sealer)
        except QueueFull as full:
            refused = [entry["queue"] for entry in full.full], str(full)
        except BadRequest as error:
            refused = sorted({row[0] for row in rows}), str(error)
        if refused is not None:
            await conn.fetchval(BACK_OFF_SQL, *refused)
            self._log.warning("timers of %s could not be delivered, retried later: %s", ", ".join(refused[0]),
                              refused[1])
        return len(rows)
