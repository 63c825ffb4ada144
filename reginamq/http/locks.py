"""POST /api/v1/locks: queen-mq's ``client.lock()``, ``client.semaphore()`` and ``client.locks``
(engine/locks.py). 200 with one verdict per op; a lock held by somebody else is a verdict."""

from __future__ import annotations

import msgspec

from reginamq.engine import locks
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_WRITE


class LocksBody(msgspec.Struct):
    operations: list[locks.LockOp]


async def apply(broker: Broker, request: Request) -> responses.Response:
    prepared = locks.prepare(request.json(LocksBody).operations)
    return responses.json(200, {"results": await locks.run(broker.store, prepared)})


ROUTES: list = [
    ("POST", "/api/v1/locks", apply, READ_WRITE),
]
