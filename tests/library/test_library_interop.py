"""The library and HTTP on one database: a message pushed in-process is popped over HTTP by the
official queen-mq client against the session's broker (two worker processes), and the reverse,
with the same payload, ids and traceId; leases taken on one side are acked on the other; long
polls are woken across the two."""

from __future__ import annotations

import asyncio

import msgspec

from reginamq.library import PopResult, PushResult
from tests.conformance.helpers import open_client, pop_now


async def test_library_push_is_popped_and_acked_by_the_official_client(library, broker_url, queue):
    pushed = await library.push(queue, [{"order": 7, "lines": [1.5, "x"]}], partition="p1",
                                transaction_ids=["lib-1"], trace_id="00000000-0000-4000-8000-000000000001")
    async with open_client(broker_url) as queen:
        messages = await pop_now(queen, queue, partition="p1")
        assert len(messages) == 1
        message = messages[0]
        assert message["data"] == {"order": 7, "lines": [1.5, "x"]}
        assert message["transactionId"] == "lib-1" and message["id"] == pushed[0].message_id
        assert message["traceId"] == "00000000-0000-4000-8000-000000000001"
        assert (await queen.ack(message, True))["success"]
    assert not await library.pop(queue)


async def test_client_push_is_popped_by_the_library_and_acked_over_http(library, broker_url, http, queue):
    async with open_client(broker_url) as queen:
        await queen.queue(queue).partition("p2").push([{"data": {"from": "http"}, "transactionId": "http-1"}])
    popped = await library.pop(queue, partition="p2", batch=10)
    assert [(m.data, m.transaction_id) for m in popped.messages] == [({"from": "http"}, "http-1")]
    message = popped.messages[0]
    answer = await http.post("/api/v1/ack", json={"transactionId": message.transaction_id,
                                                  "partitionId": message.partition_id, "leaseId": message.lease_id})
    assert answer.status_code == 200 and answer.json()[0]["success"]
    assert not await library.pop(queue, partition="p2")


async def test_long_polls_are_woken_across_http_and_the_library(library, http, queue):
    waiting = asyncio.create_task(library.pop(queue, wait=True, timeout_ms=30_000))
    await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "over http"}]})
    assert [m.data for m in (await waiting).messages] == ["over http"]

    other = queue + "-b"
    over_http = asyncio.create_task(http.get(f"/api/v1/pop/queue/{other}", params={"wait": "true",
                                                                                  "timeout": "30000"}))
    await library.push(other, ["in process"])
    answer = await over_http
    assert answer.status_code == 200 and [m["data"] for m in answer.json()["messages"]] == ["in process"]


async def test_typed_results_decode_from_http_answers(library, http, queue):
    """The Structs' wire names are the HTTP answer's keys: an HTTP pop decodes into PopResult."""
    pushed = msgspec.json.decode((await http.post("/api/v1/push", json={"items": [
        {"queue": queue, "payload": {"n": 1}}]})).content, type=list[PushResult])
    answer = await http.get(f"/api/v1/pop/queue/{queue}")
    popped = msgspec.json.decode(answer.content, type=PopResult)
    assert popped.messages[0].id == pushed[0].message_id and popped.messages[0].data == {"n": 1}
    assert (await library.ack(popped.messages))[0].success
