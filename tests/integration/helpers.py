"""Small raw-HTTP helpers shared by the integration tests (no SDK: the wire is what is tested)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx

from tests.conftest import eventually

QUEUE_MODE = "__QUEUE_MODE__"
ISO_MILLIS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
PUSH_FIELDS = {"index", "message_id", "transaction_id", "queueName", "status"}
POP_FIELDS = {"success", "queue", "partition", "partitionId", "leaseId", "consumerGroup",
              "partitionsClaimed", "messages"}
MESSAGE_FIELDS = {"id", "transactionId", "traceId", "data", "producerSub", "createdAt", "partitionId",
                  "partition", "leaseId", "consumerGroup", "deliveryAttempt"}
ACK_FIELDS = {"index", "transactionId", "success", "error", "leaseReleased", "dlq", "noop"}


def unique(prefix: str = "x") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def item(queue: str, payload: Any, partition: str | None = None, txid: str | None = None,
         **extra: Any) -> dict:
    out: dict[str, Any] = {"queue": queue, "payload": payload}
    if partition is not None:
        out["partition"] = partition
    if txid is not None:
        out["transactionId"] = txid
    out.update(extra)
    return out


async def push_items(http: httpx.AsyncClient, items: list[dict]) -> list[dict]:
    response = await http.post("/api/v1/push", json={"items": items})
    assert response.status_code == 201, response.text
    body = response.json()
    assert isinstance(body, list) and len(body) == len(items)
    return body


async def push(http: httpx.AsyncClient, queue: str, *payloads: Any, partition: str | None = None,
               txids: list[str] | None = None) -> list[dict]:
    items = [item(queue, p, partition, None if txids is None else txids[i]) for i, p in enumerate(payloads)]
    return await push_items(http, items)


async def pop_raw(http: httpx.AsyncClient, queue: str | None = None, partition: str | None = None,
                  **params: Any) -> httpx.Response:
    if queue is None:
        path = "/api/v1/pop"
    elif partition is None:
        path = f"/api/v1/pop/queue/{queue}"
    else:
        path = f"/api/v1/pop/queue/{queue}/partition/{partition}"
    query = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
    return await http.get(path, params=query)


async def pop(http: httpx.AsyncClient, queue: str | None = None, partition: str | None = None,
              **params: Any) -> dict | None:
    """A pop that must succeed: the decoded 200 body, or None for a 204 (checked to be empty)."""
    response = await pop_raw(http, queue, partition, **params)
    if response.status_code == 204:
        assert response.content == b""
        return None
    assert response.status_code == 200, response.text
    return response.json()


async def pop_until(http: httpx.AsyncClient, queue: str | None = None, partition: str | None = None,
                    seconds: float = 10.0, **params: Any) -> dict | None:
    """Pop (without waiting) until a body comes back or ``seconds`` pass: for messages that are
    handed out again once a lease runs out, or once a delay is over."""
    return await eventually(lambda: pop(http, queue, partition, **params), seconds)


async def pop_messages(http: httpx.AsyncClient, queue: str | None = None, partition: str | None = None,
                       **params: Any) -> list[dict]:
    body = await pop(http, queue, partition, **params)
    return [] if body is None else body["messages"]


def ack_body(message: dict, status: str | None = "completed", *, lease: bool = True,
             **extra: Any) -> dict:
    body: dict[str, Any] = {"transactionId": message["transactionId"], "partitionId": message["partitionId"]}
    if status is not None:
        body["status"] = status
    if lease and message.get("leaseId"):
        body["leaseId"] = message["leaseId"]
    group = message.get("consumerGroup")
    body["consumerGroup"] = None if group in (None, QUEUE_MODE) else group
    body.update(extra)
    return body


async def ack(http: httpx.AsyncClient, message: dict, status: str | None = "completed", **extra: Any) -> dict:
    response = await http.post("/api/v1/ack", json=ack_body(message, status, **extra))
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, list) and len(body) == 1
    assert set(body[0]) == ACK_FIELDS
    return body[0]


async def ack_batch(http: httpx.AsyncClient, messages: list[dict], statuses: list[str] | str = "completed",
                    consumer_group: str | None = None) -> list[dict]:
    if isinstance(statuses, str):
        statuses = [statuses] * len(messages)
    acknowledgments = [ack_body(m, s) for m, s in zip(messages, statuses, strict=True)]
    for a in acknowledgments:
        a.pop("consumerGroup")
    response = await http.post("/api/v1/ack/batch", json={"consumerGroup": consumer_group,
                                                          "acknowledgments": acknowledgments})
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, list) and len(body) == len(messages)
    return body


async def configure(http: httpx.AsyncClient, queue: str, options: dict | None = None, **extra: Any) -> dict:
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": options or {}, **extra})
    assert response.status_code == 200, response.text
    return response.json()


async def queue_count(db, name: str) -> int:
    return await db.fetchval("SELECT count(*) FROM rq_queues WHERE name = $1", name)


async def dlq_count(db, name: str) -> int:
    return await db.fetchval(
        "SELECT count(*) FROM rq_dlq d JOIN rq_queues q ON q.id = d.queue_id WHERE q.name = $1", name)


async def post_operations(http: httpx.AsyncClient, path: str, ops: list[Any]) -> list[dict]:
    """POST ``{"operations": ops}`` to a batch route (kv, locks, timers): the 200 answer's
    results, checked to be one per op, in order."""
    response = await http.post(path, json={"operations": ops})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [result["index"] for result in body.get("results", [])] == list(range(len(ops))), body
    return body["results"]
