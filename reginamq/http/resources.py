"""Resources: overview, queues, queue detail and depth, namespaces, tasks, partitions.

Answer shapes (camelCase JSON; every list of partitions is paged with limit/offset):
- overview: {queues, partitions, namespaces, tasks, messages: {total, pending, inFlight, deadLetter},
  consumerGroups, subscriptions, dlq, lastWriteAt, timestamp}
- queues: {queues: [{name, id, namespace, task, options, partitions, messages, pending, consumerGroups,
  dlq, expired, lastWriteAt, createdAt, updatedAt}], total, limit, offset}
- queues/:queue: the queue entry with partitionCount, partitions: [partition page], limit, offset,
  groups: [consumer-group entries for this queue], queueMode: entry or null
- queues/:queue/depth: {queue, group, pending, partitionsPending, conflation, effectivePending,
  partitions: [{partition, pending}] (largest first), partitionCount, limit, offset}
- namespaces / tasks: {namespaces|tasks: [{namespace|task, queues, partitions, messages, pending}], total}
- partitions: {partitions: [{id, name, queue, lastOffset, logStart, messages, pending, cursors,
  oldestPendingAt, lastWriteAt, createdAt}], total, limit, offset}
"""

from __future__ import annotations

from reginamq.engine import resources
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_name, check_queue_name
from reginamq.engine.views import Page
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY

MAX_PAGE = 1_000
MAX_OFFSET = 2**31 - 1


def page(request: Request, default: int = 100) -> Page:
    return Page(limit=request.query_int("limit", default, 1, MAX_PAGE),
                          offset=request.query_int("offset", 0, 0, MAX_OFFSET))


def optional_name(request: Request, name: str) -> str | None:
    value = request.query(name)
    return check_name(name, value) if value else None


async def overview(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await resources.overview(broker.store))


async def list_queues(broker: Broker, request: Request) -> responses.Response:
    namespace, task = optional_name(request, "namespace"), optional_name(request, "task")
    search, paging = optional_name(request, "search"), page(request)
    return responses.json(200, await resources.list_queues(broker.store, namespace, task, search, paging))


async def queue_detail(broker: Broker, request: Request) -> responses.Response:
    queue, paging = check_queue_name(request.path_params["queue"]), page(request)
    return responses.json(200, await resources.queue_detail(broker.store, queue, paging))


async def queue_depth(broker: Broker, request: Request) -> responses.Response:
    queue = check_queue_name(request.path_params["queue"])
    group = request.query("group") or request.query("consumerGroup")
    group = check_name("group", group) if group else None
    paging = page(request, default=MAX_PAGE)
    return responses.json(200, await resources.depth(broker.store, queue, group, paging))


async def namespaces(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await resources.groupings(broker.store, by_task=False))


async def tasks(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await resources.groupings(broker.store, by_task=True))


async def partitions(broker: Broker, request: Request) -> responses.Response:
    queue = request.query("queue")
    queue = check_queue_name(queue) if queue else None
    search, paging = optional_name(request, "search"), page(request)
    return responses.json(200, await resources.list_partitions(broker.store, queue, search, paging))


ROUTES: list = [
    ("GET", "/api/v1/resources/overview", overview, READ_ONLY),
    ("GET", "/api/v1/resources/queues", list_queues, READ_ONLY),
    ("GET", "/api/v1/resources/queues/{queue}", queue_detail, READ_ONLY),
    ("GET", "/api/v1/resources/queues/{queue}/depth", queue_depth, READ_ONLY),
    ("GET", "/api/v1/resources/namespaces", namespaces, READ_ONLY),
    ("GET", "/api/v1/resources/tasks", tasks, READ_ONLY),
    ("GET", "/api/v1/resources/partitions", partitions, READ_ONLY),
]
