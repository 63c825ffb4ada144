"""The message plane's one validated path: push, pop, ack, lease renewal, transactions, queue
configure and delete, and the dead-letter queue.

Every caller of the message plane calls these functions and nothing below them: the HTTP routes
(reginamq/http) and the in-process library (reginamq/library) alike. They take typed Python
values, ``None`` meaning "not given", and do every check, default and meter count the plane has.
So the two doors agree by construction, not by care: what one refuses the other refuses with
the same :class:`~reginamq.common.errors.BadRequest` (status, text and extra keys, which HTTP
writes as its answer), a value left out gets the same default through both, and a call counts
in the meter (and so in ``rq_process_metrics``) whichever door it came through. Nothing here
renders an answer, and nothing in a caller validates: a driver only turns its transport into
these values (query strings, JSON bodies, binary push frames) and writes what comes back
(201/204/200, JSON or pop frames).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Literal, NoReturn

from reginamq.common import jsonlimits
from reginamq.common.errors import BadRequest
from reginamq.common.times import EARLIEST, LATEST, check_moment
from reginamq.config import Settings
from reginamq.engine import ack as acks
from reginamq.engine import dlq, queues
from reginamq.engine import pop as pops
from reginamq.engine import push as pushes
from reginamq.engine import transaction as transactions
from reginamq.engine.broker import Broker
from reginamq.engine.names import (
    QUEUE_MODE,
    check_flag,
    check_int,
    check_name,
    check_queue_name,
    check_uuid,
    group_or_queue_mode,
)
from reginamq.engine.options import MAX_SECONDS

DEFAULT_LEASE_RENEWAL_SECONDS = 60
DEFAULT_DLQ_PAGE = 100
MAX_DLQ_PAGE = 1_000
MAX_OFFSET = 2**31 - 1


async def push(broker: Broker, items: list[pushes.PushItem], producer_sub: str | None = None,
               message_ids: list[str | None] | None = None, connection: object = None) -> list[dict]:
    """Push ``items``; the answer holds one entry per item (queued, duplicate, buffered, ...).

    ``message_ids`` are ids the client minted, one per item or None (binary push frames).
    ``connection`` names who waits for the answer: push fusion lets a caller that sends its
    next push only after this one's answer go without waiting for company (push_fusion.py).
    """
    answer = await broker.pushes.push(pushes.prepare(items, producer_sub, message_ids), connection)
    broker.meter.pushed(len(items))
    return answer


def check_payloads(payloads: Sequence[bytes]) -> None:
    """Strict JSON (common/jsonlimits.py) for payloads that did not arrive inside a body already
    checked whole, as an HTTP push's did: one check over all of them."""
    jsonlimits.check(b"[" + b",".join(payloads) + b"]")


def pop_request(settings: Settings, *, queue: str | None = None, partition: str | None = None,
                namespace: str | None = None, task: str | None = None, group: str | None = None,
                batch: int | None = None, partitions: int | None = None, wait: bool = False,
                timeout_ms: int | None = None, lease_seconds: int | None = None, auto_ack: bool = False,
                subscription_mode: str | None = None, subscription_from: datetime | Literal["now"] | None = None,
                conflation: bool | None = None, autopilot: bool = False) -> pops.PopRequest:
    """A pop as the engine runs it, or a BadRequest. Refusals of what is asked together carry a
    pop answer's shape (``success`` and ``messages`` beside ``error``), which queen-mq reads."""
    if queue is None:
        if partition is not None:
            _refuse("partition needs queue: a partition is named within its queue")
        if namespace is None and task is None:
            _refuse("namespace or task is required")
    elif namespace is not None or task is not None:
        _refuse("pop from a queue or from a namespace/task selection, not both")
    mode = settings.default_subscription_mode if subscription_mode is None else subscription_mode
    if mode not in pops.SUBSCRIPTION_MODES:
        raise BadRequest("subscriptionMode must be one of: all, new, new-only")
    group = group_or_queue_mode(group)
    auto_ack = check_flag("autoAck", auto_ack)
    if conflation is not None:
        check_flag("conflation", conflation)
    if conflation and group == QUEUE_MODE:
        _refuse("conflation requires consumerGroup: queue mode is one cursor shared by every consumer, "
                "with no group to hold a delivery policy")
    if conflation and auto_ack:
        _refuse("conflation cannot be combined with autoAck: the newest message would be consumed "
                "at delivery, with no lease to retry it if its handler fails")
    return pops.PopRequest(
        queue=None if queue is None else check_queue_name(queue),
        partition=None if partition is None else check_name("partition", partition),
        namespace=None if namespace is None else check_name("namespace", namespace),
        task=None if task is None else check_name("task", task),
        group=group,
        batch=None if batch is None else check_int("batch", batch, 1, pops.MAX_BATCH),
        partitions=None if partitions is None else check_int("partitions", partitions, 1,
                                                             pops.MAX_PARTITIONS_PER_POP),
        auto_ack=auto_ack,
        wait=check_flag("wait", wait),
        timeout_ms=pops.DEFAULT_TIMEOUT_MS if timeout_ms is None else check_int("timeout", timeout_ms, 0,
                                                                               pops.MAX_TIMEOUT_MS),
        lease_seconds=0 if lease_seconds is None else check_int("leaseSeconds", lease_seconds, 0, MAX_SECONDS),
        subscription_mode=pops.SUBSCRIPTION_MODES[mode],
        subscription_from=None if subscription_from is None else _moment("subscriptionFrom", subscription_from),
        autopilot=check_flag("autopilot", autopilot),
        conflation=conflation,
    )


async def pop(broker: Broker, request: pops.PopRequest,
              hang_up: Callable[[], Awaitable[object]] | None = None) -> pops.Popped:
    """Run ``request`` (from :func:`pop_request`); ``rows`` is empty when nothing came before
    its wait ran out. ``hang_up`` returns when the caller stops listening: a long poll ends
    there, leasing nothing for nobody."""
    popped = await pops.pop(broker, request, hang_up)
    if not popped.rows:
        broker.meter.empty_pop()
    return popped


async def ack(broker: Broker, acknowledgments: list[acks.Ack], group: str | None = None) -> list[dict]:
    """Acknowledge (or fail, retry, dead-letter) delivered messages; ``group`` stands for any
    acknowledgment that names none. One answer per acknowledgment, refused ones included."""
    prepared = acks.prepare(acknowledgments, group)
    answers = await broker.acks.write(prepared)
    broker.meter.acked(answers)
    if broker.autopilot.awaiting_acks:
        for lease_id, count in collections.Counter(filter(None, prepared.leases)).items():
            broker.autopilot.acked(lease_id, count)
    return answers


async def renew(broker: Broker, lease_id: str, seconds: int = DEFAULT_LEASE_RENEWAL_SECONDS) -> dict:
    """Extend a lease to ``seconds`` from now; a lease that is gone answers ``success: false``.
    ``seconds`` has a default but no "not given": a null sent for it is refused, as HTTP did."""
    lease_id = check_uuid("leaseId", lease_id)
    return await acks.extend(broker.store, lease_id, check_int("seconds", seconds, 1, MAX_SECONDS))


async def transaction(broker: Broker, body: transactions.TransactionBody, producer_sub: str | None = None,
                      pushed: tuple[list[pushes.PushItem], list[str | None] | None] | None = None) -> dict:
    """Acks and pushes that commit together or not at all; a rollback answers ``success: false``
    with its reason. ``pushed`` are items (and client-minted ids) sent beside the operations."""
    answer = await transactions.execute(broker.store, transactions.prepare(body, producer_sub, pushed),
                                        broker.sealer)
    broker.meter.transacted(answer["results"])
    return answer


async def configure(broker: Broker, body: queues.ConfigureBody) -> dict:
    """Create or change a queue. Encryption needs a key on this broker: without one it could
    neither seal the queue's pushes nor open its pops."""
    if (body.options or {}).get("encryptionEnabled") is True and not broker.sealer.has_key:
        raise BadRequest("encryptionEnabled needs an encryption key on the broker (REGINAMQ_ENCRYPTION_KEY, "
                         "64 hex characters); this one has none, so it could not serve the queue")
    return await queues.configure(broker.store, body)


async def delete_queue(broker: Broker, queue: str) -> dict:
    return await queues.delete(broker.store, queue)


def dlq_query(*, queue: str | None, group: str | None = None, partition: str | None = None,
              since: datetime | None = None, until: datetime | None = None, limit: int | None = None,
              offset: int | None = None) -> dlq.DlqQuery:
    """A page of a queue's dead letters to read with :func:`dlq_page`, or a BadRequest."""
    return dlq.DlqQuery(
        queue=_required_queue(queue),
        group=None if group is None else check_name("consumerGroup", group),
        partition=None if partition is None else check_name("partition", partition),
        since=None if since is None else _moment("from", since),
        until=None if until is None else _moment("to", until),
        limit=DEFAULT_DLQ_PAGE if limit is None else check_int("limit", limit, 1, MAX_DLQ_PAGE),
        offset=0 if offset is None else check_int("offset", offset, 0, MAX_OFFSET),
    )


async def dlq_page(broker: Broker, query: dlq.DlqQuery) -> dict:
    return await dlq.page(broker.store, query, broker.sealer.reveal)


async def dlq_replay(broker: Broker, dead_letter_id: str) -> dict:
    """Put a dead letter back at the end of its partition as a new message; 404 for an unknown
    (or already replayed) id, 409 when its partition is gone."""
    dead_letter_id = check_uuid("id", dead_letter_id)
    try:
        answer = await dlq.replay(broker.store, dead_letter_id)
    except dlq.PartitionGone:
        raise BadRequest("the dead letter's partition no longer exists; purge the entry instead",
                         status=409) from None
    if answer is None:
        raise BadRequest(f"no dead letter with id {dead_letter_id}", status=404)
    return answer


async def dlq_purge(broker: Broker, *, queue: str | None, group: str | None = None,
                    partition: str | None = None) -> dict:
    queue = _required_queue(queue)
    group = None if group is None else check_name("consumerGroup", group)
    partition = None if partition is None else check_name("partition", partition)
    return {"success": True, "deleted": await dlq.purge(broker.store, queue, group, partition)}


def unavailable(broker: Broker) -> None:
    """Count a call the database could not serve (the meter's db_errors, and the refusals the
    outage's log line reports once the database is back)."""
    broker.meter.db_errors += 1
    broker.database.reachability.refuse()


def _refuse(error: str) -> NoReturn:
    raise BadRequest(error, extra={"success": False, "messages": []})


def _required_queue(queue: str | None) -> str:
    if not queue:
        raise BadRequest("queue is required")
    return check_queue_name(queue)


def _moment(kind: str, value: datetime | str) -> datetime:
    if value == "now":
        return datetime.now(UTC)
    if isinstance(value, datetime):
        try:
            return check_moment(value)
        except ValueError:
            pass
    raise BadRequest(f"{kind} must be 'now' or a moment between {EARLIEST.year} and {LATEST.year}")
