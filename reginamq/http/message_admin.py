"""Operator access to single messages over HTTP: browse, detail, delete, retry (the message
plane's push, pop and ack are in messages.py; the DLQ's replay and purge in dlq.py)."""

from __future__ import annotations

from reginamq.common.errors import BadRequest
from reginamq.engine import message_admin
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_name, check_partition_id, check_queue_name, group_or_queue_mode
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY, READ_WRITE

MAX_PAGE = 1_000


def _group(request: Request) -> str:
    return group_or_queue_mode(request.query("consumerGroup"))


def _address(request: Request) -> tuple[str, str]:
    return (check_partition_id("partitionId", request.path_params["partitionId"]),
            check_name("transactionId", request.path_params["transactionId"]))


async def list_messages(broker: Broker, request: Request) -> responses.Response:
    queue = request.query("queue")
    if not queue:
        raise BadRequest("query parameter queue is required")
    partition, status = request.query("partition"), request.query("status")
    if status and status not in message_admin.STATUSES:
        raise BadRequest(f"status must be one of: {', '.join(message_admin.STATUSES)}")
    query = message_admin.MessageQuery(
        queue=check_queue_name(queue),
        partition=check_name("partition", partition) if partition else None,
        group=_group(request),
        status=status or None,
        since=request.query_timestamp("from"),
        until=request.query_timestamp("to"),
        limit=request.query_int("limit", 100, 1, MAX_PAGE),
        offset=request.query_int("offset", 0, 0, 2**31 - 1),
    )
    if query.since and query.until and query.since > query.until:
        raise BadRequest("from must not be after to")
    return 200, await message_admin.page(broker.store, query, broker.sealer.reveal)


async def get_message(broker: Broker, request: Request) -> responses.Response:
    partition_id, txid = _address(request)
    group = _group(request)
    body = await message_admin.get(broker.store, partition_id, txid, group, broker.sealer.reveal)
    if body is None:
        return responses.error(404, "message not found")
    return 200, body


async def delete_message(broker: Broker, request: Request) -> responses.Response:
    partition_id, txid = _address(request)
    deleted = await message_admin.delete(broker.store, partition_id, txid)
    if not deleted:
        return responses.error(404, "message not found")
    return responses.json(200, {"success": True, "deleted": deleted, "partitionId": partition_id,
                                "transactionId": txid})


async def retry_message(broker: Broker, request: Request) -> responses.Response:
    partition_id, txid = _address(request)
    answer = await message_admin.retry(broker.store, partition_id, txid)
    if answer is None:
        return responses.error(404, "message not found")
    return responses.json(200, answer)


ROUTES: list = [
    ("GET", "/api/v1/messages", list_messages, READ_ONLY),
    ("POST", "/api/v1/messages/{partitionId}/{transactionId}/retry", retry_message, READ_WRITE),
    ("GET", "/api/v1/messages/{partitionId}/{transactionId*}", get_message, READ_ONLY),
    ("DELETE", "/api/v1/messages/{partitionId}/{transactionId*}", delete_message, READ_WRITE),
]
