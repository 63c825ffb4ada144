"""The message plane: push, pop, ack, lease renewal, transactions."""

from __future__ import annotations

import collections

from reginamq.common.errors import BadRequest
from reginamq.engine import ack as acks
from reginamq.engine import pop as pops
from reginamq.engine import push as pushes
from reginamq.engine import transaction as transactions
from reginamq.engine.broker import Broker
from reginamq.engine.names import QUEUE_MODE, check_name, check_queue_name, check_uuid, group_or_queue_mode
from reginamq.engine.options import MAX_SECONDS
from reginamq.http import binary_push, pop_frames, responses
from reginamq.http.request import Request, decode_json, json_object

MAX_BATCH = 10_000
MAX_PARTITIONS_PER_POP = 1_000
MAX_TIMEOUT_MS = 3_600_000
SUBSCRIPTION_MODES = {"all": "all", "new": "new", "new-only": "new"}


async def push(broker: Broker, request: Request) -> responses.Response:
    if binary_push.sent(request.content_type):
        decoded = binary_push.decode_push(request.body, broker.settings.max_body_bytes)
        items, message_ids, counts = decoded.items, decoded.message_ids, decoded.counts
    else:
        items, message_ids, counts = request.json(pushes.PushBody).items, None, False
    answer = await broker.pushes.push(pushes.prepare(items, request.subject, message_ids), request.connection)
    broker.meter.pushed(len(items))
    return responses.json(201, binary_push.push_counts(answer) if counts else answer)


async def pop_queue(broker: Broker, request: Request) -> responses.Response:
    return await _pop(broker, request, queue=request.path_params["queue"])


async def pop_partition(broker: Broker, request: Request) -> responses.Response:
    return await _pop(broker, request, queue=request.path_params["queue"],
                      partition=check_name("partition", request.path_params["partition"]))


async def pop_discovery(broker: Broker, request: Request) -> responses.Response:
    namespace, task = request.query("namespace") or None, request.query("task") or None
    if namespace is None and task is None:
        return responses.json(400, {"success": False, "error": "namespace or task is required",
                                    "messages": []})
    return await _pop(broker, request, namespace=check_name("namespace", namespace) if namespace else None,
                      task=check_name("task", task) if task else None)


async def _pop(broker: Broker, request: Request, *, queue: str | None = None, partition: str | None = None,
               namespace: str | None = None, task: str | None = None) -> responses.Response:
    mode = request.query("subscriptionMode") or broker.settings.default_subscription_mode
    if mode not in SUBSCRIPTION_MODES:
        raise BadRequest("subscriptionMode must be one of: all, new, new-only")
    group = group_or_queue_mode(request.query("consumerGroup"))
    auto_ack = request.query_bool("autoAck", False)
    conflation = request.query_bool("conflation", None)
    if conflation and group == QUEUE_MODE:
        return _refused("conflation requires consumerGroup: queue mode is one cursor shared by every consumer, "
                        "with no group to hold a delivery policy")
    if conflation and auto_ack:
        return _refused("conflation cannot be combined with autoAck: the newest message would be consumed "
                        "at delivery, with no lease to retry it if its handler fails")
    pop_request = pops.PopRequest(
        queue=None if queue is None else check_queue_name(queue),
        partition=partition,
        namespace=namespace,
        task=task,
        group=group,
        batch=request.query_int("batch", None, 1, MAX_BATCH),
        partitions=request.query_int("partitions", None, 1, MAX_PARTITIONS_PER_POP),
        auto_ack=auto_ack,
        wait=request.query_bool("wait", False),
        timeout_ms=request.query_int("timeout", 30_000, 0, MAX_TIMEOUT_MS),
        lease_seconds=request.query_int("leaseSeconds", 0, 0, MAX_SECONDS),
        subscription_mode=SUBSCRIPTION_MODES[mode],
        subscription_from=request.query_timestamp("subscriptionFrom"),
        autopilot=request.query_bool("autopilot", False),
        conflation=conflation,
    )
    framed = request.query_bool("frames", False)
    popped = await pops.pop(broker, pop_request, request.wait_disconnect)
    if not popped.rows:
        broker.meter.empty_pop()
        if pops.answers_empty(popped, pop_request):
            return 200, pops.render_empty(popped, pop_request)
        return responses.NO_CONTENT
    if framed:
        try:
            return 200, pop_frames.render(popped, group, broker.sealer.reveal), pop_frames.CONTENT_TYPE
        except pop_frames.NotFramable:
            pass  # queen-mq reads the JSON answer as well: it tells them apart by their first bytes
    return 200, pops.render(popped, group, broker.sealer.reveal)


def _refused(error: str) -> responses.Response:
    """A pop refused for its parameters, in the shape of a pop's answer (queen-mq raises it)."""
    return responses.json(400, {"success": False, "error": error, "messages": []})


async def ack(broker: Broker, request: Request) -> responses.Response:
    one = request.json(acks.Ack)
    return await _acks(broker, acks.prepare([one]))


async def ack_batch(broker: Broker, request: Request) -> responses.Response:
    body = request.json(acks.AckBatch)
    return await _acks(broker, acks.prepare(body.acknowledgments, body.consumerGroup))


async def _acks(broker: Broker, prepared: acks.PreparedAcks) -> responses.Response:
    answers = await broker.acks.write(prepared)
    broker.meter.acked(answers)
    if broker.autopilot.awaiting_acks:
        for lease_id, count in collections.Counter(filter(None, prepared.leases)).items():
            broker.autopilot.acked(lease_id, count)
    return responses.json(200, answers)


async def extend_lease(broker: Broker, request: Request) -> responses.Response:
    lease_id = check_uuid("leaseId", request.path_params["leaseId"])
    seconds = json_object(request).get("seconds", 60)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_SECONDS:
        raise BadRequest(f"seconds must be an integer between 1 and {MAX_SECONDS}")
    return responses.json(200, await acks.extend(broker.store, lease_id, seconds))


async def transaction(broker: Broker, request: Request) -> responses.Response:
    if binary_push.sent(request.content_type):
        head, decoded = binary_push.decode_transaction(request.body, broker.settings.max_body_bytes)
        body = decode_json(head, transactions.TransactionBody) if head else transactions.TransactionBody(operations=[])
        prepared = transactions.prepare(body, request.subject, (decoded.items, decoded.message_ids))
        counts = decoded.counts
    else:
        prepared = transactions.prepare(request.json(transactions.TransactionBody), request.subject)
        counts = False
    answer = await transactions.execute(broker.store, prepared, broker.sealer)
    broker.meter.transacted(answer["results"])
    return responses.json(200, binary_push.transaction_counts(answer) if counts else answer)
