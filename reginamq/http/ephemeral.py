"""Ephemeral queues (queen-mq's ``client.ephemeral``; engine/ephemeral.py): /api/v1/ephemeral/*.

Refusals carry ``{"error", "code"}``: the client tells a missing queue (``depth``'s 404,
``ephemeral_queue_not_found``) from a broker without the routes by the code alone."""

from __future__ import annotations

from reginamq.engine import ephemeral
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import ADMIN, READ_ONLY, READ_WRITE, WRITE_ONLY


async def push(broker: Broker, request: Request) -> responses.Response:
    """201 ``{pushed}``; 429 ``queue_full`` when the bounds refuse the request."""
    body = request.json(ephemeral.PushBody)
    pushed = await ephemeral.push(broker.store, body)
    broker.meter.pushed(pushed)
    return responses.json(201, {"pushed": pushed})


async def pop(broker: Broker, request: Request) -> responses.Response:
    queue = request.query("queue")
    if not queue:
        ephemeral.refuse("queue is required")
    answer = await ephemeral.pop(
        broker.store, broker.waiters, broker.meter, queue, request.query("partition") or None,
        request.query("group") or None,
        request.query_int("batch", 1, 1, ephemeral.MAX_BATCH), request.query_bool("wait", False),
        request.query_int("timeout", 30_000, 0, ephemeral.MAX_TIMEOUT_MS), request.query_bool("autoAck", False))
    return 200, answer


async def ack(broker: Broker, request: Request) -> responses.Response:
    body = request.json(ephemeral.AckBody)
    return responses.json(200, await ephemeral.ack(broker.store, body))


async def configure(broker: Broker, request: Request) -> responses.Response:
    """201 with the stored declaration."""
    body = request.json(ephemeral.ConfigureBody)
    return 201, await ephemeral.configure(broker.store, body)


async def reset(broker: Broker, request: Request) -> responses.Response:
    """200 ``{queue, dropped}`` (0 for a queue that is not there)."""
    queue = request.json(ephemeral.QueueBody).queue
    return responses.json(200, await ephemeral.reset(broker.store, queue))


async def delete(broker: Broker, request: Request) -> responses.Response:
    """200 ``{queue, deleted, declared}``; ``deleted: false`` when there was nothing."""
    queue = request.path_params["queue"]
    return responses.json(200, await ephemeral.delete(broker.store, queue))


async def queues(broker: Broker, request: Request) -> responses.Response:
    return 200, await ephemeral.listing(broker.store)


async def depth(broker: Broker, request: Request) -> responses.Response:
    """404 ``ephemeral_queue_not_found`` for a queue neither declared nor holding anything."""
    queue, group = request.path_params["queue"], request.query("group") or None
    answer = await ephemeral.depth(broker.store, queue, group)
    if answer is None:
        return responses.error(404, "no ephemeral queue by that name exists", code="ephemeral_queue_not_found")
    return 200, answer


ROUTES: list = [
    ("POST", "/api/v1/ephemeral/push", push, WRITE_ONLY),
    ("GET", "/api/v1/ephemeral/pop", pop, READ_WRITE),
    ("POST", "/api/v1/ephemeral/ack", ack, READ_WRITE),
    ("POST", "/api/v1/ephemeral/configure", configure, READ_WRITE),
    ("POST", "/api/v1/ephemeral/reset", reset, READ_WRITE),
    ("DELETE", "/api/v1/ephemeral/queue/{queue}", delete, ADMIN),
    ("GET", "/api/v1/ephemeral/queues", queues, READ_ONLY),
    ("GET", "/api/v1/ephemeral/queues/{queue}/depth", depth, READ_ONLY),
]
