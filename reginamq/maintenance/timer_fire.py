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
from reginamq.engine.encryption import Sealer
from reginamq.store import Store
from reginamq.store.database import Row

BATCH = 1000
INTERVAL = 0.25


class TimerFire(Periodic):
    def __init__(self, store: Store, sealer: Sealer, interval: float = INTERVAL):
        super().__init__(interval, "timers")
        self._store = store
        self._sealer = sealer

    async def tick(self) -> None:
        while await self._fire() == BATCH:
            pass  # a full round: more may be due

    async def _fire(self) -> int:
        """Deliver one round; how many timers it took (refused ones included)."""
        refused: tuple[list[str], str] | None = None
        rows: list[Row] = []

        async def deliver(tx: Store) -> None:
            rows[:] = await tx.timers.take_due(BATCH)
            if rows:
                items = [pushes.PushItem(queue=row[0], partition=row[2], payload=msgspec.Raw(row[3]),
                                         transactionId=row[4]) for row in rows]
                await pushes.execute(tx, pushes.prepare(items, None, [row[5] for row in rows]), self._sealer)

        try:
            await self._store.atomically(deliver)
        except QueueFull as full:
            refused = [entry["queue"] for entry in full.full], str(full)
        except BadRequest as error:
            refused = sorted({row[0] for row in rows}), str(error)
        if refused is not None:
            await self._store.timers.back_off(*refused)
            self._log.warning("timers of %s could not be delivered, retried later: %s", ", ".join(refused[0]),
                              refused[1])
        return len(rows)
