"""Ack fusion: concurrent ack requests of one process share one rq_ack call (fusion.py).

Consumers ack each pop on their own, so with many consumers the acks of a moment are many small
calls whose fixed cost (the call, the cursor lock statement, the commit, the notices after it)
outweighs their per-message work; woken by the same push, they also arrive together. Requests
for different (partition, consumer group) cursors commute: rq_ack settles each cursor on its own,
so one call applying several requests answers each exactly as calls one after the other would.
Two requests for the same cursor never share a call. One call is in flight at a time: the next
one takes everything that arrived meanwhile, so the batch follows the load.

The acks of a transaction (POST /api/v1/transaction) run inside its own database transaction
and do not come here.
"""

from __future__ import annotations

import asyncio

from reginamq.engine import ack as acks
from reginamq.engine.fusion import Fusion, concatenated
from reginamq.engine.meter import Meter
from reginamq.store import Store


class AckFusion(Fusion[acks.PreparedAcks]):
    max_items = acks.MAX_ACKS_PER_REQUEST
    max_flights = 1

    def __init__(self, store: Store, meter: Meter) -> None:
        super().__init__()
        self._store = store
        self._meter = meter

    async def write(self, prepared: acks.PreparedAcks) -> list[dict]:
        """The answer per acknowledgement of this request, in its order (as acks.write)."""
        if not prepared.txids:
            return []
        return await self._enqueue(prepared)

    def _keys(self, request: acks.PreparedAcks) -> set:
        return acks.cursors(request)

    def _size(self, request: acks.PreparedAcks) -> int:
        return len(request.txids)

    async def _flush(self, batch: list[tuple[acks.PreparedAcks, asyncio.Future]]) -> None:
        requests = [prepared for prepared, _ in batch]
        answers = await acks.write(self._store, concatenated(requests, acks.COLUMNS))
        self._meter.ack_calls += 1
        for (_, future), mine in zip(batch, acks.split(answers, requests), strict=True):
            if not future.done():
                future.set_result(mine)
