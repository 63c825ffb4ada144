"""The message plane as one interface with two drivers: the library (``reginamq.Broker``, in
this process) and HTTP (httpx against the session's broker, two worker processes).

:class:`Plane` is the library's message plane (library/broker.py) without ``consume``;
``reginamq.Broker`` satisfies it as it is. :class:`HttpPlane` sends each call as the HTTP
request that means it, decodes the answer into the library's typed Structs (their wire names
are the answer's keys) and raises what the library raises for an error answer
(``reginamq.library.errors.from_answer``). So a case written once against ``plane`` runs
through both doors and must see the same results and the same refusals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from reginamq.library.errors import from_answer
from reginamq.library.types import (
    Ack,
    AckResult,
    AckStatus,
    DeleteResult,
    DlqPage,
    Message,
    PopResult,
    PushItem,
    PushResult,
    QueueConfig,
    QueueOptions,
    RenewResult,
    ReplayResult,
    SubscriptionMode,
    TransactionResult,
)

if TYPE_CHECKING:
    from reginamq import Broker

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


class Plane(Protocol):
    async def push(self, queue: str, payloads: Iterable[Any], *, partition: str = "Default",
                   transaction_ids: Sequence[str | None] | None = None,
                   trace_id: str | None = None) -> list[PushResult]: ...

    async def push_items(self, items: Sequence[PushItem]) -> list[PushResult]: ...

    async def pop(self, queue: str | None = None, *, partition: str | None = None, namespace: str | None = None,
                  task: str | None = None, group: str | None = None, batch: int | None = None,
                  partitions: int | None = None, wait: bool = False, timeout_ms: int | None = None,
                  lease_seconds: int | None = None, auto_ack: bool = False,
                  subscription_mode: SubscriptionMode | None = None,
                  subscription_from: datetime | Literal["now"] | None = None,
                  conflation: bool | None = None, autopilot: bool = False) -> PopResult: ...

    async def ack(self, messages: Message | Ack | Sequence[Message | Ack], status: AckStatus | bool = "completed", *,
                  error: str | None = None, group: str | None = None) -> list[AckResult]: ...

    async def renew(self, lease: str | Message | PopResult, seconds: int = 60) -> RenewResult: ...

    async def transaction(self, *, acks: Sequence[Message | Ack] = (), pushes: Sequence[PushItem] = (),
                          required_leases: Sequence[str] = ()) -> TransactionResult: ...

    async def configure(self, queue: str, options: QueueOptions | Mapping[str, Any] | None = None, *,
                        namespace: str | None = None, task: str | None = None,
                        mode: Literal["merge", "replace"] = "merge") -> QueueConfig: ...

    async def delete_queue(self, queue: str) -> DeleteResult: ...

    async def dlq(self, queue: str, *, group: str | None = None, partition: str | None = None,
                  since: datetime | None = None, until: datetime | None = None, limit: int = 100,
                  offset: int = 0) -> DlqPage: ...

    async def dlq_replay(self, dead_letter_id: str) -> ReplayResult: ...

    async def dlq_purge(self, queue: str, *, group: str | None = None, partition: str | None = None) -> int: ...


def _segment(value: str) -> str:
    return quote(value, safe="")


def _query(**values: object) -> dict[str, str]:
    """Query parameters as HTTP clients send them: None left out, bools as true/false."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[name] = value.isoformat()
        else:
            out[name] = str(value)
    return out


def _wire_item(item: PushItem) -> dict[str, Any]:
    if item.raw is not None:
        payload = msgspec.Raw(bytes(item.raw))
    elif item.data is msgspec.UNSET:
        payload = msgspec.Raw(b"null")  # the library refuses this before sending; the cases never do it
    else:
        payload = msgspec.Raw(_encode(item.data))
    wire: dict[str, Any] = {"queue": item.queue, "partition": item.partition, "payload": payload}
    if item.transaction_id is not None:
        wire["transactionId"] = item.transaction_id
    if item.trace_id is not None:
        wire["traceId"] = item.trace_id
    return wire


def _wire_ack(item: Message | Ack, status: str, error: str | None) -> dict[str, Any]:
    if isinstance(item, Message):
        return {"transactionId": item.transaction_id, "partitionId": item.partition_id,
                "consumerGroup": item.consumer_group, "leaseId": item.lease_id, "status": status, "error": error}
    return {"transactionId": item.transaction_id, "partitionId": item.partition_id, "consumerGroup": item.group,
            "leaseId": item.lease_id, "status": item.status, "error": item.error}


QUEUE_MODE = "__QUEUE_MODE__"


def _as_the_library_spells_it(popped: PopResult) -> PopResult:
    """The three places where a decoded HTTP pop answer and ``Broker.pop`` spell one delivery
    differently, Queen's wire keeping Queen's spelling: queue mode is ``consumerGroup:
    "__QUEUE_MODE__"`` on the wire and None in the library, an autoAck pop's ``leaseId`` is
    ``""`` on the wire and None in the library, and a wire message does not repeat its queue
    (the answer's head names it). Everything else is compared as it was decoded."""
    def group(value: str | None) -> str | None:
        return None if value == QUEUE_MODE else value

    messages = [msgspec.structs.replace(m, lease_id=m.lease_id or None, consumer_group=group(m.consumer_group),
                                        queue=m.queue if m.queue is not None else popped.queue)
                for m in popped.messages]
    return msgspec.structs.replace(popped, lease_id=popped.lease_id or None,
                                   consumer_group=group(popped.consumer_group), messages=messages)


class HttpPlane:
    """The message plane over HTTP: one request per call, answers decoded into the library's types."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def _send(self, method: str, path: str, answer: type[T], *, body: object = None,
                    params: Mapping[str, str] | None = None) -> T:
        content = None if body is None else _encode(body)
        headers = {"content-type": "application/json"} if content is not None else None
        response = await self.client.request(method, path, content=content, params=params, headers=headers)
        if response.status_code >= 400:
            raise from_answer(response.status_code, response.content)
        return msgspec.json.decode(response.content, type=answer)

    async def push(self, queue: str, payloads: Iterable[Any], *, partition: str = "Default",
                   transaction_ids: Sequence[str | None] | None = None,
                   trace_id: str | None = None) -> list[PushResult]:
        values = list(payloads)
        ids: Sequence[str | None] = transaction_ids or [None] * len(values)
        return await self.push_items([PushItem(queue=queue, data=value, partition=partition, transaction_id=txid,
                                               trace_id=trace_id) for value, txid in zip(values, ids, strict=True)])

    async def push_items(self, items: Sequence[PushItem]) -> list[PushResult]:
        return await self._send("POST", "/api/v1/push", list[PushResult],
                                body={"items": [_wire_item(item) for item in items]})

    async def pop(self, queue: str | None = None, *, partition: str | None = None, namespace: str | None = None,
                  task: str | None = None, group: str | None = None, batch: int | None = None,
                  partitions: int | None = None, wait: bool = False, timeout_ms: int | None = None,
                  lease_seconds: int | None = None, auto_ack: bool = False,
                  subscription_mode: SubscriptionMode | None = None,
                  subscription_from: datetime | Literal["now"] | None = None,
                  conflation: bool | None = None, autopilot: bool = False) -> PopResult:
        if queue is None:
            path = "/api/v1/pop"
        elif partition is None:
            path = f"/api/v1/pop/queue/{_segment(queue)}"
        else:
            path = f"/api/v1/pop/queue/{_segment(queue)}/partition/{_segment(partition)}"
        params = _query(namespace=namespace, task=task, consumerGroup=group, batch=batch, partitions=partitions,
                        wait=wait, timeout=timeout_ms, leaseSeconds=lease_seconds, autoAck=auto_ack,
                        subscriptionMode=subscription_mode, subscriptionFrom=subscription_from,
                        conflation=conflation, autopilot=autopilot)
        response = await self.client.get(path, params=params)
        if response.status_code >= 400:
            raise from_answer(response.status_code, response.content)
        if response.status_code == 204:
            return PopResult(queue=queue or "", consumer_group=group or None)
        return _as_the_library_spells_it(msgspec.json.decode(response.content, type=PopResult))

    async def ack(self, messages: Message | Ack | Sequence[Message | Ack], status: AckStatus | bool = "completed", *,
                  error: str | None = None, group: str | None = None) -> list[AckResult]:
        given = [messages] if isinstance(messages, (Message, Ack)) else list(messages)
        said = "completed" if status is True else "failed" if status is False else status
        acks = [_wire_ack(item, said, error) for item in given]
        if len(acks) == 1 and group is None:
            return await self._send("POST", "/api/v1/ack", list[AckResult], body=acks[0])
        return await self._send("POST", "/api/v1/ack/batch", list[AckResult],
                                body={"acknowledgments": acks, "consumerGroup": group})

    async def renew(self, lease: str | Message | PopResult, seconds: int = 60) -> RenewResult:
        lease_id = lease if isinstance(lease, str) else lease.lease_id or ""
        return await self._send("POST", f"/api/v1/lease/{_segment(lease_id)}/extend", RenewResult,
                                body={"seconds": seconds})

    async def transaction(self, *, acks: Sequence[Message | Ack] = (), pushes: Sequence[PushItem] = (),
                          required_leases: Sequence[str] = ()) -> TransactionResult:
        operations = [{"type": "ack", **_wire_ack(item, "completed", None)} for item in acks]
        if pushes:
            operations.append({"type": "push", "items": [_wire_item(item) for item in pushes]})
        body: dict[str, Any] = {"operations": operations}
        if required_leases:
            body["requiredLeases"] = list(required_leases)
        return await self._send("POST", "/api/v1/transaction", TransactionResult, body=body)

    async def configure(self, queue: str, options: QueueOptions | Mapping[str, Any] | None = None, *,
                        namespace: str | None = None, task: str | None = None,
                        mode: Literal["merge", "replace"] = "merge") -> QueueConfig:
        given = msgspec.to_builtins(options) if isinstance(options, QueueOptions) else options
        body: dict[str, Any] = {"queue": queue, "mode": mode, "namespace": namespace, "task": task,
                                "options": None if given is None else dict(given)}
        return await self._send("POST", "/api/v1/configure", QueueConfig, body=body)

    async def delete_queue(self, queue: str) -> DeleteResult:
        return await self._send("DELETE", f"/api/v1/resources/queues/{_segment(queue)}", DeleteResult)

    async def dlq(self, queue: str, *, group: str | None = None, partition: str | None = None,
                  since: datetime | None = None, until: datetime | None = None, limit: int = 100,
                  offset: int = 0) -> DlqPage:
        params = _query(queue=queue, consumerGroup=group, partition=partition, limit=limit, offset=offset,
                        **{"from": since, "to": until})
        return await self._send("GET", "/api/v1/dlq", DlqPage, params=params)

    async def dlq_replay(self, dead_letter_id: str) -> ReplayResult:
        return await self._send("POST", f"/api/v1/dlq/{_segment(dead_letter_id)}/replay", ReplayResult)

    async def dlq_purge(self, queue: str, *, group: str | None = None, partition: str | None = None) -> int:
        answer = await self._send("DELETE", "/api/v1/dlq", dict[str, Any],
                                  params=_query(queue=queue, consumerGroup=group, partition=partition))
        return int(answer["deleted"])


if TYPE_CHECKING:
    def _both_are_planes(broker: Broker, http: HttpPlane) -> tuple[Plane, Plane]:
        return broker, http  # mypy: the library's Broker and the HTTP driver both satisfy Plane
