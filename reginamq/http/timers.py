"""Timers (queen-mq's ``client.timers`` and ``client.timer(queue)``; engine/timers.py):
POST /api/v1/timers schedules, reschedules and cancels in one transaction; DELETE cancels one
timer on a route of its own (queen-mq's ``cancel``); GET peeks at one or pages through a queue's
pending timers. Verdicts (``absent``, ``too_late``) are 200s with ``ok: false``."""

from __future__ import annotations

import msgspec

from reginamq.engine import op_batch, timers
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_name
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY, READ_WRITE


class TimersBody(msgspec.Struct):
    operations: list[msgspec.Raw]


async def apply(broker: Broker, request: Request) -> responses.Response:
    prepared = timers.prepare(request.json(TimersBody).operations)
    return responses.json(200, {"results": await op_batch.alone(broker.store, timers.apply, prepared)})


async def cancel(broker: Broker, request: Request) -> responses.Response:
    prepared = timers.cancel_op(request.path_params["queue"], request.path_params["timerKey"],
                                request.query("txn") or None)
    [result] = await op_batch.alone(broker.store, timers.apply, prepared)
    return responses.json(200, result)


async def peek(broker: Broker, request: Request) -> responses.Response:
    queue, key = request.path_params["queue"], request.path_params["timerKey"]
    return 200, await timers.peek(broker.store, queue, key)


async def page(broker: Broker, request: Request) -> responses.Response:
    after = request.query("after") or None
    if after is not None:
        check_name("after", after)
    # clamped, never refused: the client cannot know the broker's ceiling
    limit = min(max(request.query_int("limit", timers.LIST_DEFAULT, -2**31, 2**31), 1), timers.LIST_MAX)
    queue = request.path_params["queue"]
    return 200, await timers.page(broker.store, queue, after, limit)


ROUTES: list = [
    ("POST", "/api/v1/timers", apply, READ_WRITE),
    ("GET", "/api/v1/timers/{queue}", page, READ_ONLY),
    ("GET", "/api/v1/timers/{queue}/{timerKey*}", peek, READ_ONLY),
    ("DELETE", "/api/v1/timers/{queue}/{timerKey*}", cancel, READ_WRITE),
]
