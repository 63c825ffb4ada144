"""framed_pop: the official client asks for pops' messages as binary frames (frames=true) and
unpacks them itself. What a consumer receives must be what a JSON consumer receives, message
for message, whatever the payloads, however they were pushed, encrypted queues included; and
its acks (whose partitionId is the frame's partition number) must work everywhere."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from queen.http.pop_frames import is_pop_frames

from reginamq.engine.names import check_partition_id
from tests.conformance.helpers import open_client

PAYLOADS = [{"n": 1, "nested": {"list": [1, 2.5, None, True], "text": "ünïcødé ✓"}}, "a string", 42, 3.25,
            [1, "two", {"three": 3}], None, True, {"big": 12345678901234567890123}]


def comparable(message: dict) -> tuple:
    """A delivered message as both kinds of answer must agree on it (the framed partitionId is
    the partition's number, which the broker reads back into its id)."""
    return (message["id"], message["transactionId"], message["traceId"], repr(message["data"]),
            message["createdAt"], message["partition"], check_partition_id("partitionId", message["partitionId"]),
            message["deliveryAttempt"])


async def consume_all(url: str, queue: str, group: str, count: int, **client_options) -> list[dict]:
    """Every message of the queue through consume() in the group, acked by the client."""
    received: list[dict] = []

    async def handler(messages):
        received.extend(messages)

    async with open_client(url, **client_options) as queen:
        builder = queen.queue(queue).group(group).subscription_mode("all").batch(7).limit(count)
        await asyncio.wait_for(builder.consume(handler), 60)
        assert await queen.queue(queue).group(group).batch(10).wait(False).pop() == []  # all acked
    return received


async def push_mixed_workload(url: str, queue: str) -> int:
    """JSON pushes (payloads of every JSON kind, traceIds, several partitions) and binary pushes."""
    count = 0
    async with open_client(url) as queen:
        for partition in ("p1", "p2"):
            await queen.queue(queue).partition(partition).push(
                [{"data": payload, "traceId": str(uuid.uuid4())} for payload in PAYLOADS])
            count += len(PAYLOADS)
    async with open_client(url, binary_push=True, push_compression=True) as queen:
        await queen.queue(queue).partition("binary").push([{"data": payload} for payload in PAYLOADS])
        count += len(PAYLOADS)
    return count


async def test_a_framed_client_receives_exactly_what_a_json_client_does(broker_url, queue, group):
    count = await push_mixed_workload(broker_url, queue)

    framed = await consume_all(broker_url, queue, f"{group}-framed", count, framed_pop=True)
    plain = await consume_all(broker_url, queue, f"{group}-json", count)

    assert len(framed) == len(plain) == count
    assert sorted(map(comparable, framed)) == sorted(map(comparable, plain))
    assert all(m["partitionId"].isdigit() for m in framed)  # they did come as frames


async def test_an_encrypted_queue_is_served_framed_in_clear(keyed_broker, queue, group):
    async with httpx.AsyncClient(base_url=keyed_broker) as http:
        configured = await http.post("/api/v1/configure",
                                     json={"queue": queue, "options": {"encryptionEnabled": True}})
        assert configured.status_code == 200, configured.text
    count = await push_mixed_workload(keyed_broker, queue)

    framed = await consume_all(keyed_broker, queue, f"{group}-framed", count, framed_pop=True)
    plain = await consume_all(keyed_broker, queue, f"{group}-json", count)

    assert sorted(map(comparable, framed)) == sorted(map(comparable, plain))


async def test_the_answer_is_framed_and_a_trace_id_frames_cannot_hold_falls_back_to_json(broker_url, queue):
    async with httpx.AsyncClient(base_url=broker_url) as http:
        await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"n": 1}}]})
        framed = await http.get(f"/api/v1/pop/queue/{queue}", params={"frames": "true", "batch": "5"})
        assert framed.status_code == 200 and is_pop_frames(framed.content)
        assert framed.headers["content-type"] == "application/x-queen-pop"
        await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"n": 2},
                                                         "traceId": "not-a-uuid"}]})
        fallback = await http.get(f"/api/v1/pop/queue/{queue}", params={"frames": "true", "batch": "5",
                                                                       "consumerGroup": "other",
                                                                       "subscriptionMode": "all"})
        assert fallback.status_code == 200 and not is_pop_frames(fallback.content)
        assert [m["traceId"] for m in fallback.json()["messages"]] == [None, "not-a-uuid"]


async def test_the_partition_number_of_a_frame_is_accepted_wherever_a_partition_id_is(broker_url, queue):
    async with open_client(broker_url, framed_pop=True) as queen:
        await queen.queue(queue).partition("p").push([{"data": {"n": n}} for n in range(3)])
        messages = await queen.queue(queue).batch(3).wait(False).pop()
        number = messages[0]["partitionId"]
        assert number.isdigit()
        txid = messages[0]["transactionId"]
        async with httpx.AsyncClient(base_url=broker_url) as http:
            one = await http.get(f"/api/v1/messages/{number}/{txid}")
            assert one.status_code == 200 and one.json()["data"] == {"n": 0}
            traced = await http.post("/api/v1/traces", json={"transactionId": txid, "partitionId": number,
                                                             "data": {"step": "seen"}})
            assert traced.status_code == 201
            timeline = await http.get(f"/api/v1/traces/{number}/{txid}")
            assert timeline.status_code == 200 and len(timeline.json()["traces"]) == 1
        result = await queen.ack(messages, True)
        assert result["success"] is True
