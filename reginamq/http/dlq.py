"""Dead-letter queue routes."""

from __future__ import annotations

from reginamq.common.errors import BadRequest
from reginamq.engine import dlq
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_name, check_queue_name, check_uuid
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import ADMIN, READ_ONLY, READ_WRITE

MAX_PAGE = 1_000


async def list_dlq(broker: Broker, request: Request) -> responses.Response:
    queue = request.query("queue")
    if not queue:
        raise BadRequest("query parameter queue is required")
    group, partition = request.query("consumerGroup"), request.query("partition")
    query = dlq.DlqQuery(
        queue=check_queue_name(queue),
        group=check_name("consumerGroup", group) if group else None,
        partition=check_name("partition", partition) if partition else None,
        since=request.query_timestamp("from"),
        until=request.query_timestamp("to"),
        limit=request.query_int("limit", 100, 1, MAX_PAGE),
        offset=request.query_int("offset", 0, 0, 2**31 - 1),
    )
    return responses.json(200, await dlq.page(broker.store, query, broker.sealer.reveal))


async def replay(broker: Broker, request: Request) -> responses.Response:
    entry_id = check_uuid("id", request.path_params["id"])
    try:
        answer = await dlq.replay(broker.store, entry_id)
    except dlq.PartitionGone:
        return responses.error(409, "the dead letter's partition no longer exists; purge the entry instead")
    if answer is None:
        return responses.error(404, f"no dead letter with id {entry_id}")
    return responses.json(200, answer)


async def purge(broker: Broker, request: Request) -> responses.Response:
    queue = request.query("queue")
    if not queue:
        raise BadRequest("query parameter queue is required")
    group, partition = request.query("consumerGroup"), request.query("partition")
    queue = check_queue_name(queue)
    group = check_name("consumerGroup", group) if group else None
    partition = check_name("partition", partition) if partition else None
    deleted = await dlq.purge(broker.store, queue, group, partition)
    return responses.json(200, {"success": True, "deleted": deleted})


ROUTES: list = [
    ("GET", "/api/v1/dlq", list_dlq, READ_ONLY),
    ("POST", "/api/v1/dlq/{id}/replay", replay, READ_WRITE),
    ("DELETE", "/api/v1/dlq", purge, ADMIN),
]
