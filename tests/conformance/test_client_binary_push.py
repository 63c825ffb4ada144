"""The binary push body through the official client: ``binary_push`` (items framed instead of
JSON) and ``push_compression`` (each partition's messages framed and zstd-compressed by the
client, also inside transactions). What the client pushes that way must come back from an
ordinary pop exactly as if it had been pushed as JSON."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conformance.helpers import create_queue, drain, open_client, pop_now

PAYLOADS = [{"n": 1, "text": "héllo ✓"}, [1, 2, {"deep": [None, True]}], "a string", 42, 2.5, None]


class Recording(httpx.AsyncHTTPTransport):
    """The real transport, noting the Content-Type of every push and transaction it sends."""

    def __init__(self):
        super().__init__()
        self.sent: list[str] = []

    async def handle_async_request(self, request):
        if request.url.path in ("/api/v1/push", "/api/v1/transaction"):
            self.sent.append(request.headers.get("content-type", ""))
        return await super().handle_async_request(request)


@pytest.fixture(params=[False, True], ids=["binary", "binary+zstd"])
async def binary(request, broker_url):
    transport = Recording()
    async with open_client(broker_url, binary_push=True, push_compression=request.param,
                           transport=transport) as client:
        yield client
    # every push really went out as the binary body
    assert transport.sent and set(transport.sent) == {"application/x-queen-push"}


async def test_a_binary_push_pops_back_as_pushed_in_order(binary, queen, queue):
    await create_queue(queen, queue)
    answer = await binary.queue(queue).partition("p1").push([{"data": payload} for payload in PAYLOADS])
    assert [item["status"] for item in answer] == ["queued"] * len(PAYLOADS)
    messages = await pop_now(queen, queue, partition="p1", batch=100)
    assert [m["data"] for m in messages] == PAYLOADS
    assert [m["id"] for m in messages] == [item["message_id"] for item in answer]
    assert [m["transactionId"] for m in messages] == [item["transaction_id"] for item in answer]


async def test_a_binary_push_spans_partitions_and_keeps_given_transaction_ids(binary, queen, queue):
    await create_queue(queen, queue)
    txids = [f"tx-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for partition, chunk in (("a", txids[:2]), ("b", txids[2:])):
        await binary.queue(queue).partition(partition).push(
            [{"data": {"txid": txid}, "transactionId": txid} for txid in chunk])
    for partition, chunk in (("a", txids[:2]), ("b", txids[2:])):
        messages = await pop_now(queen, queue, partition=partition)
        assert [m["transactionId"] for m in messages] == chunk
        assert [m["data"] for m in messages] == [{"txid": txid} for txid in chunk]


async def test_a_binary_push_of_a_known_transaction_id_is_a_duplicate(binary, queen, queue):
    await create_queue(queen, queue)
    [first] = await binary.queue(queue).push([{"data": 1, "transactionId": "same"}])
    [again] = await binary.queue(queue).push([{"data": 2, "transactionId": "same"}])
    assert (first["status"], again["status"]) == ("queued", "duplicate")
    assert again["message_id"] == first["message_id"]
    assert [m["data"] for m in await drain(queen, queue)] == [1]


async def test_a_transaction_with_compressed_pushes_commits_as_one(broker_url, queen, queue, queue2):
    await create_queue(queen, queue)
    await queen.queue(queue).push([{"data": "input"}])
    [message] = await pop_now(queen, queue)
    transport = Recording()
    async with open_client(broker_url, binary_push=True, push_compression=True, transport=transport) as client:
        result = await (client.transaction()
                        .ack(message)
                        .queue(queue2).partition("out").push([{"data": {"out": 1}}, {"data": {"out": 2}}])
                        .commit())
    assert transport.sent == ["application/x-queen-push"]
    assert result["success"] is True, result
    assert [(r["type"], r["success"]) for r in result["results"]] == [("ack", True), ("push", True), ("push", True)]
    assert await pop_now(queen, queue) == []
    outputs = await pop_now(queen, queue2, partition="out")
    assert [m["data"] for m in outputs] == [{"out": 1}, {"out": 2}]
    assert [m["id"] for m in outputs] == [r["messageId"] for r in result["results"][1:]]


async def test_a_client_asking_for_framed_pops_reads_the_json_answer(broker_url, queen, queue):
    """framed_pop adds frames=true; a broker that does not frame answers JSON, which the client reads."""
    await create_queue(queen, queue)
    await queen.queue(queue).push([{"data": {"n": n}} for n in range(3)])
    async with open_client(broker_url, framed_pop=True) as client:
        messages = await pop_now(client, queue)
        assert [m["data"] for m in messages] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert (await client.ack(messages, True))["success"] is True
    assert await pop_now(queen, queue) == []
