"""The official client against a broker with ``--auth jwt``: its ``bearer_token`` is all it takes."""

from __future__ import annotations

import httpx
import pytest

from tests.auth_helpers import mint
from tests.conformance.helpers import open_client, pop_now


async def test_read_write_token_pushes_pops_and_acks(auth_broker, queue):
    async with open_client(auth_broker[0], bearer_token=mint("read-write", sub="orders-service")) as queen:
        results = await queen.queue(queue).partition("p").push([{"data": {"n": n}} for n in range(3)])
        assert [result["status"] for result in results] == ["queued"] * 3
        messages = await pop_now(queen, queue)
        assert [m["data"]["n"] for m in messages] == [0, 1, 2]
        assert {m["producerSub"] for m in messages} == {"orders-service"}
        acked = await queen.ack(messages, True)
        assert acked["success"] is True, acked
        assert await pop_now(queen, queue) == []


async def test_read_only_token_cannot_push(auth_broker, queue):
    async with open_client(auth_broker[0], bearer_token=mint("read-only")) as queen:
        with pytest.raises(httpx.HTTPStatusError) as refusal:
            await queen.queue(queue).push({"data": 1})
        assert refusal.value.response.status_code == 403
        assert refusal.value.code == "forbidden"
        assert "read" in str(refusal.value)


async def test_write_only_token_pushes_but_cannot_pop(auth_broker, queue):
    async with open_client(auth_broker[0], bearer_token=mint("write-only", sub="sensor-7")) as producer:
        assert (await producer.queue(queue).push({"data": 1}))[0]["status"] == "queued"
        assert await pop_now(producer, queue) == []  # the client turns the 403 into "no messages"
    async with open_client(auth_broker[0], bearer_token=mint("read-write")) as consumer:
        assert [m["producerSub"] for m in await pop_now(consumer, queue)] == ["sensor-7"]


async def test_no_token_is_401(auth_broker, queue):
    async with open_client(auth_broker[0], bearer_token=None) as queen:
        with pytest.raises(httpx.HTTPStatusError) as refusal:
            await queen.queue(queue).push({"data": 1})
        assert refusal.value.response.status_code == 401
        assert refusal.value.code == "unauthorized"
