"""Dead-letter queue routes (validated in engine/operations.py)."""

from __future__ import annotations

from reginamq.engine import operations
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import ADMIN, READ_ONLY, READ_WRITE


async def list_dlq(broker: Broker, request: Request) -> responses.Response:
    query = operations.dlq_query(
        queue=request.query("queue") or None,
        group=request.query("consumerGroup") or None,
        partition=request.query("partition") or None,
        since=request.query_timestamp("from"),
        until=request.query_timestamp("to"),
        limit=request.query_integer("limit"),
        offset=request.query_integer("offset"),
    )
    return responses.json(200, await operations.dlq_page(broker, query))


async def replay(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await operations.dlq_replay(broker, request.path_params["id"]))


async def purge(broker: Broker, request: Request) -> responses.Response:
    answer = await operations.dlq_purge(broker, queue=request.query("queue") or None,
                                        group=request.query("consumerGroup") or None,
                                        partition=request.query("partition") or None)
    return responses.json(200, answer)


ROUTES: list = [
    ("GET", "/api/v1/dlq", list_dlq, READ_ONLY),
    ("POST", "/api/v1/dlq/{id}/replay", replay, READ_WRITE),
    ("DELETE", "/api/v1/dlq", purge, ADMIN),
]
