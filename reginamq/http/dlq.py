"""Dead-letter queue routes."""

from __future__ import annotations

from reginamq.engine import dlq
from reginamq.engine.errors import BadRequest
from reginamq.engine.names import check_name, check_queue_name
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.runtime import Broker

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
    return responses.json(200, await broker.run(lambda conn: dlq.page(conn, query)))
