"""The message plane: push, pop, ack, lease renewal, transactions.

Transport only: each handler turns its request into typed values, calls engine/operations.py
(which validates, defaults and counts) and writes the answer.
"""

from __future__ import annotations

from reginamq.engine import ack as acks
from reginamq.engine import operations
from reginamq.engine import pop as pops
from reginamq.engine import push as pushes
from reginamq.engine import transaction as transactions
from reginamq.engine.broker import Broker
from reginamq.http import binary_push, pop_frames, responses
from reginamq.http.request import Request, decode_json, json_object


async def push(broker: Broker, request: Request) -> responses.Response:
    if binary_push.sent(request.content_type):
        decoded = binary_push.decode_push(request.body, broker.settings.max_body_bytes)
        items, message_ids, counts = decoded.items, decoded.message_ids, decoded.counts
    else:
        items, message_ids, counts = request.json(pushes.PushBody).items, None, False
    answer = await operations.push(broker, items, request.subject, message_ids, request.connection)
    return responses.json(201, binary_push.push_counts(answer) if counts else answer)


async def pop_queue(broker: Broker, request: Request) -> responses.Response:
    return await _pop(broker, request, queue=request.path_params["queue"])


async def pop_partition(broker: Broker, request: Request) -> responses.Response:
    return await _pop(broker, request, queue=request.path_params["queue"],
                      partition=request.path_params["partition"])


async def pop_discovery(broker: Broker, request: Request) -> responses.Response:
    return await _pop(broker, request, namespace=request.query("namespace") or None,
                      task=request.query("task") or None)


async def _pop(broker: Broker, request: Request, *, queue: str | None = None, partition: str | None = None,
               namespace: str | None = None, task: str | None = None) -> responses.Response:
    pop_request = operations.pop_request(
        broker.settings,
        queue=queue,
        partition=partition,
        namespace=namespace,
        task=task,
        group=request.query("consumerGroup"),
        batch=request.query_integer("batch"),
        partitions=request.query_integer("partitions"),
        wait=request.query_bool("wait", False),
        timeout_ms=request.query_integer("timeout"),
        lease_seconds=request.query_integer("leaseSeconds"),
        auto_ack=request.query_bool("autoAck", False),
        subscription_mode=request.query("subscriptionMode") or None,
        subscription_from=request.query_timestamp("subscriptionFrom"),
        conflation=request.query_bool("conflation", None),
        autopilot=request.query_bool("autopilot", False),
    )
    framed = request.query_bool("frames", False)
    popped = await operations.pop(broker, pop_request, request.wait_disconnect)
    if not popped.rows:
        if pops.answers_empty(popped, pop_request):
            return 200, pops.render_empty(popped, pop_request)
        return responses.NO_CONTENT
    if framed:
        try:
            return 200, pop_frames.render(popped, pop_request.group, broker.sealer.reveal), pop_frames.CONTENT_TYPE
        except pop_frames.NotFramable:
            pass  # queen-mq reads the JSON answer as well: it tells them apart by their first bytes
    return 200, pops.render(popped, pop_request.group, broker.sealer.reveal)


async def ack(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await operations.ack(broker, [request.json(acks.Ack)]))


async def ack_batch(broker: Broker, request: Request) -> responses.Response:
    body = request.json(acks.AckBatch)
    return responses.json(200, await operations.ack(broker, body.acknowledgments, body.consumerGroup))


async def extend_lease(broker: Broker, request: Request) -> responses.Response:
    seconds = json_object(request).get("seconds", operations.DEFAULT_LEASE_RENEWAL_SECONDS)
    return responses.json(200, await operations.renew(broker, request.path_params["leaseId"], seconds))


async def transaction(broker: Broker, request: Request) -> responses.Response:
    if binary_push.sent(request.content_type):
        head, decoded = binary_push.decode_transaction(request.body, broker.settings.max_body_bytes)
        body = decode_json(head, transactions.TransactionBody) if head else transactions.TransactionBody(operations=[])
        answer = await operations.transaction(broker, body, request.subject, (decoded.items, decoded.message_ids))
        return responses.json(200, binary_push.transaction_counts(answer) if decoded.counts else answer)
    body = request.json(transactions.TransactionBody)
    return responses.json(200, await operations.transaction(broker, body, request.subject))
