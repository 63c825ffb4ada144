"""Traces routes: record, by message, by name, names.

Recording answers 201 ``{success, traceId, createdAt}``: ``traceId`` as Queen names the new
trace's id (the official client hands the answer back from ``msg.trace()``).
"""

from __future__ import annotations

from reginamq.common.times import stamp
from reginamq.engine import traces
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_name, check_partition_id
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY, READ_WRITE

MAX_PAGE = 1_000
MAX_TIMELINE = 10_000


async def record(broker: Broker, request: Request) -> responses.Response:
    trace = traces.prepare(request.json(traces.TraceBody))
    created_at = await traces.add(broker.store, trace)
    return responses.json(201, {"success": True, "traceId": trace.id,
                                "createdAt": stamp(created_at)})


async def for_message(broker: Broker, request: Request) -> responses.Response:
    partition_id = check_partition_id("partitionId", request.path_params["partitionId"])
    txid = check_name("transactionId", request.path_params["transactionId"])
    limit = request.query_int("limit", MAX_TIMELINE, 1, MAX_TIMELINE)
    return responses.json(200, await traces.for_message(broker.store, partition_id, txid, limit))


async def by_name(broker: Broker, request: Request) -> responses.Response:
    name = check_name("name", request.path_params["name"])
    since, until = request.query_timestamp("from"), request.query_timestamp("to")
    limit = request.query_int("limit", 100, 1, MAX_PAGE)
    offset = request.query_int("offset", 0, 0, 2**31 - 1)
    return responses.json(200, await traces.by_name(broker.store, name, since, until, limit, offset))


async def names(broker: Broker, request: Request) -> responses.Response:
    search = request.query("search")
    search = check_name("search", search) if search else None
    limit = request.query_int("limit", 100, 1, MAX_PAGE)
    offset = request.query_int("offset", 0, 0, 2**31 - 1)
    return responses.json(200, await traces.names(broker.store, search, limit, offset))


ROUTES: list = [
    ("POST", "/api/v1/traces", record, READ_WRITE),
    ("GET", "/api/v1/traces/names", names, READ_ONLY),
    ("GET", "/api/v1/traces/by-name/{name*}", by_name, READ_ONLY),
    ("GET", "/api/v1/traces/{partitionId}/{transactionId*}", for_message, READ_ONLY),
]
