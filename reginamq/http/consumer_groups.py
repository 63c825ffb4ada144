"""Consumer-group routes: list, lagging, detail, delete (all queues or one), seek, subscription.

Answer shapes (camelCase JSON):
- GET /consumer-groups and /consumer-groups/lagging?minLagSeconds=N (default 60): an array of
  {name, queueName, topics, members (partitions the group holds a live lease on), cursors,
  partitions, partitionsWithLag, totalLag (messages), maxTimeLag (seconds), oldestPendingAt,
  state: Stable|Lagging|Dead, subscriptionMode, subscriptionTimestamp, subscriptionCreatedAt},
  one per (group, queue); queue mode is left out. lagging keeps entries with totalLag > 0 and
  maxTimeLag >= N.
- GET /consumer-groups/:group?queue=&limit=&offset=: Queen's shape, an object keyed by queue
  name ({} when the group reads no queue, or not the one named): {<queue>: {conflation,
  partitions: [{partition, workerId, lastConsumedAt, totalConsumed, offsetLag, timeLagSeconds,
  leaseActive, leaseExpiresAt, partitionId, committed (null: no cursor yet), position,
  lastOffset, logStart, oldestPendingAt, leasedFrom, leasedTo}], state, subscriptionMode,
  subscriptionTimestamp, subscriptionCreatedAt, partitionCount, cursors, members, totalLag,
  partitionsWithLag, maxTimeLag, oldestPendingAt, limit, offset}}. The partitions of each queue
  are paged by name, limit (1-1,000, default 1,000) and offset applying to each queue alike.
- DELETE /consumer-groups/:group[/queues/:queue]?deleteMetadata=true|false (default true):
  {deleted, consumerGroup, [queueName], cursorsDeleted, subscriptionsDeleted, metadataDeleted}
- POST /consumer-groups/:group/queues/:queue/seek {"toEnd":true} | {"timestamp":"ISO"|"now"}:
  {success, consumerGroup, queueName, seekToEnd, targetTimestamp, partitionsUpdated, cursorsCreated}
- POST /consumer-groups/:group/subscription {"queue"?, "subscriptionMode": all|new|new-only,
  "subscriptionFrom"?: now|ISO}: {success, consumerGroup, subscriptionMode, subscriptionTimestamp,
  queues, updated}
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reginamq.common.errors import BadRequest
from reginamq.common.times import EARLIEST, LATEST, moment
from reginamq.engine import consumer_groups
from reginamq.engine.broker import Broker
from reginamq.engine.names import QUEUE_MODE, check_name, check_queue_name
from reginamq.engine.pop import SUBSCRIPTION_MODES
from reginamq.http import responses
from reginamq.http.request import Request, json_object
from reginamq.http.resources import MAX_PAGE, page
from reginamq.security.roles import ADMIN, READ_ONLY, READ_WRITE

MAX_LAG_SECONDS = 10 * 365 * 86_400


def _group(request: Request) -> str:
    return check_name("consumer group", request.path_params["group"])


def _timestamp(name: str, value: Any) -> datetime:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} must be 'now' or an ISO-8601 timestamp")
    try:
        return moment(value)
    except ValueError:
        raise BadRequest(f"{name} must be 'now' or an ISO-8601 timestamp between years {EARLIEST.year} and "
                         f"{LATEST.year}, got {value[:40]!r}") from None


async def list_groups(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await consumer_groups.summaries(broker.store, None, None))


async def lagging(broker: Broker, request: Request) -> responses.Response:
    seconds = request.query_int("minLagSeconds", 60, 0, MAX_LAG_SECONDS)
    return responses.json(200, await consumer_groups.lagging(broker.store, seconds))


async def detail(broker: Broker, request: Request) -> responses.Response:
    group, paging = _group(request), page(request, default=MAX_PAGE)
    queue = request.query("queue")
    queue = check_queue_name(queue) if queue else None
    return responses.json(200, await consumer_groups.detail(broker.store, group, queue, paging))


async def delete_group(broker: Broker, request: Request) -> responses.Response:
    group, metadata = _group(request), request.query_bool("deleteMetadata", True)
    return responses.json(200, await consumer_groups.delete(broker.store, group, None, metadata))


async def delete_for_queue(broker: Broker, request: Request) -> responses.Response:
    group, metadata = _group(request), request.query_bool("deleteMetadata", True)
    queue = check_queue_name(request.path_params["queue"])
    return responses.json(200, await consumer_groups.delete(broker.store, group, queue, metadata))


async def seek(broker: Broker, request: Request) -> responses.Response:
    group, queue = _group(request), check_queue_name(request.path_params["queue"])
    body = json_object(request)
    unknown = set(body) - {"toEnd", "timestamp"}
    if unknown:
        raise BadRequest(f"unknown seek field(s): {', '.join(sorted(unknown))}; send toEnd or timestamp")
    to_end = body.get("toEnd", False)
    if not isinstance(to_end, bool):
        raise BadRequest("toEnd must be true or false")
    raw_at = body.get("timestamp")
    if to_end == (raw_at is not None):
        raise BadRequest('send exactly one of {"toEnd": true} or {"timestamp": "ISO-8601"}')
    at = None if raw_at is None else _timestamp("timestamp", raw_at)
    return responses.json(200, await consumer_groups.seek(broker.store, group, queue, to_end, at))


async def subscription(broker: Broker, request: Request) -> responses.Response:
    group = _group(request)
    if group == QUEUE_MODE:
        raise BadRequest("queue mode has no subscription: it always reads every message")
    body = json_object(request)
    queue = body.get("queue")
    queue = None if queue is None else check_queue_name(queue)
    raw_from = body.get("subscriptionFrom", body.get("subscriptionTimestamp"))
    mode = body.get("subscriptionMode")
    if mode is None and raw_from is None:
        raise BadRequest("send subscriptionMode (all, new, new-only) and/or subscriptionFrom")
    if mode is None:
        mode = "all"
    if not isinstance(mode, str) or mode not in SUBSCRIPTION_MODES:
        raise BadRequest("subscriptionMode must be one of: all, new, new-only")
    mode = SUBSCRIPTION_MODES[mode]
    start = None if raw_from is None else _timestamp("subscriptionFrom", raw_from)
    if mode == "new" and start is None:
        start = datetime.now(UTC)
    return responses.json(200, await consumer_groups.subscribe(broker.store, group, queue, mode, start))


ROUTES: list = [
    ("GET", "/api/v1/consumer-groups", list_groups, READ_ONLY),
    ("GET", "/api/v1/consumer-groups/lagging", lagging, READ_ONLY),
    ("GET", "/api/v1/consumer-groups/{group}", detail, READ_ONLY),
    ("DELETE", "/api/v1/consumer-groups/{group}", delete_group, ADMIN),
    ("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", delete_for_queue, ADMIN),
    ("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", seek, READ_WRITE),
    ("POST", "/api/v1/consumer-groups/{group}/subscription", subscription, READ_WRITE),
]
