"""A call's validated ops, encoded for the one plpgsql function that applies them (the key/value
store's ``rq_kv_apply``, the timers' ``rq_timers_apply``): on their own route, in a database
transaction of their own, or as a rider inside POST /api/v1/transaction's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

from reginamq.store import Store


class OpBatch(msgspec.Struct):
    ops: bytes   # the JSON array the function reads, in apply order
    count: int


async def alone(store: Store, apply: Callable[[Store, OpBatch], Awaitable[list[dict]]], batch: OpBatch) -> list[dict]:
    """``apply`` of the batch in a database transaction of its own."""
    return await store.atomically(lambda tx: apply(tx, batch))
