"""What Queen 2.x's key/value store, timers and ephemeral queues cost beside the message plane.

    python benchmarks/queen2_surfaces.py [--workers 2]

Starts its own broker on an embedded PostgreSQL in a temporary folder (removed at the end) and
prints, from one Python client process on the same machine:
- the latency of one call at a time (p50 / p99 of 300) for /health, a kv get by both routes,
  a kv put and a durable push of one message;
- the SQL cost of one key/value call on its own (``rq_kv_apply`` over asyncpg, no HTTP);
- ephemeral against durable pushes of 100 messages a call (8 partitions, 16 at a time), then
  ephemeral pops of 500 (``autoAck``, 8 consumers of one group);
- timers scheduled 50 a call, all due at once, and how long after the last schedule the fire
  had delivered them all;
- one idle fire round (nothing due).

One httpx client is the limit at concurrency on a small machine: compare the routes with each
other (and with /health), not with the broker's capacity, which ``reginamq bench`` measures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import uuid

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker

PAYLOAD = {"x": "y" * 200}
SEQUENTIAL_CALLS = 300


async def sequential(client: httpx.AsyncClient) -> None:
    queue, ns = f"lat-{uuid.uuid4().hex[:6]}", f"lat-{uuid.uuid4().hex[:6]}"
    await client.put(f"/api/v1/kv/{ns}/k", json={"value": 1, "forever": True})
    calls = {
        "GET /health": lambda: client.get("/health"),
        "kv get, batch route": lambda: client.post("/api/v1/kv", json={"operations": [
            {"op": "get", "ns": ns, "key": "k"}]}),
        "kv get, path route": lambda: client.get(f"/api/v1/kv/{ns}/k"),
        "kv put": lambda: client.post("/api/v1/kv", json={"operations": [
            {"op": "put", "ns": ns, "key": "k", "value": 1, "forever": True}]}),
        "durable push of one": lambda: client.post("/api/v1/push", json={"items": [{"queue": queue, "payload": 1}]}),
    }
    for name, call in calls.items():
        for _ in range(30):
            await call()
        latencies = []
        for _ in range(SEQUENTIAL_CALLS):
            started = time.perf_counter()
            answer = await call()
            latencies.append(time.perf_counter() - started)
            assert answer.status_code < 300, answer.text
        latencies.sort()
        print(f"{name}, one at a time: p50 {latencies[len(latencies) // 2] * 1e3:.2f} ms, "
              f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.2f} ms")


async def kv_sql(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for label, ops in (("get", '[{"i":0,"op":"get","shown":"get","ns":"x","key":"k"}]'),
                           ("incr", '[{"i":0,"op":"incr","shown":"incr","ns":"x","key":"k","delta":1}]')):
            for _ in range(50):
                await conn.fetchval("SELECT rq_kv_apply($1::jsonb, $2)", ops, 4 * 1024 * 1024)
            started = time.perf_counter()
            for _ in range(500):
                await conn.fetchval("SELECT rq_kv_apply($1::jsonb, $2)", ops, 4 * 1024 * 1024)
            print(f"rq_kv_apply, one {label}: {(time.perf_counter() - started) / 500 * 1e3:.2f} ms a call")
    finally:
        await conn.close()


async def concurrently(count: int, concurrency: int, call) -> tuple[float, float, float]:
    """Calls a second, p50 and p99 in ms."""
    gate, latencies = asyncio.Semaphore(concurrency), []

    async def one(index: int) -> None:
        async with gate:
            started = time.perf_counter()
            answer = await call(index)
            latencies.append(time.perf_counter() - started)
            assert answer.status_code < 300, answer.text

    started = time.perf_counter()
    await asyncio.gather(*(one(index) for index in range(count)))
    latencies.sort()
    return (count / (time.perf_counter() - started), latencies[len(latencies) // 2] * 1e3,
            latencies[int(len(latencies) * 0.99)] * 1e3)


async def pushes_and_pops(client: httpx.AsyncClient) -> None:
    ephemeral, durable = f"e-{uuid.uuid4().hex[:6]}", f"d-{uuid.uuid4().hex[:6]}"
    batch = [{"payload": PAYLOAD}] * 100
    rate, p50, p99 = await concurrently(400, 16, lambda i: client.post("/api/v1/ephemeral/push", json={
        "queue": ephemeral, "partition": f"p{i % 8}", "messages": batch}))
    print(f"ephemeral push of 100, 16 at a time: {rate * 100:,.0f} msg/s, p50 {p50:.0f} ms, p99 {p99:.0f} ms")
    rate, p50, p99 = await concurrently(400, 16, lambda i: client.post("/api/v1/push", json={
        "items": [{"queue": durable, "partition": f"p{i % 8}", "payload": PAYLOAD} for _ in range(100)]}))
    print(f"durable push of 100, 16 at a time: {rate * 100:,.0f} msg/s, p50 {p50:.0f} ms, p99 {p99:.0f} ms")
    popped, started = 0, time.perf_counter()

    async def consumer() -> None:
        nonlocal popped
        while popped < 40_000:
            answer = await client.get("/api/v1/ephemeral/pop", params={
                "queue": ephemeral, "batch": 500, "group": "g", "autoAck": "true"})
            if not answer.json()["messages"]:
                return
            popped += len(answer.json()["messages"])

    await asyncio.gather(*(consumer() for _ in range(8)))
    print(f"ephemeral pop of 500 (autoAck), 8 consumers: {popped / (time.perf_counter() - started):,.0f} msg/s")


async def timers(client: httpx.AsyncClient) -> None:
    queue, payload = f"t-{uuid.uuid4().hex[:6]}", base64.b64encode(json.dumps(PAYLOAD).encode()).decode()
    rate, p50, _ = await concurrently(200, 16, lambda i: client.post("/api/v1/timers", json={"operations": [
        {"op": "schedule", "queue": queue, "timerKey": f"k{i}-{j}", "payload": payload, "delayMs": 0,
         "txn": str(uuid.uuid4())} for j in range(50)]}))
    print(f"timers scheduled 50 a call, 16 at a time: {rate * 50:,.0f} timers/s, p50 {p50:.0f} ms")
    started = time.perf_counter()
    while (await client.get(f"/api/v1/timers/{queue}", params={"limit": 1})).json()["rows"]:
        await asyncio.sleep(0.05)
    print(f"all 10,000 due timers delivered {time.perf_counter() - started:.2f} s after the last schedule answered")


async def idle_fire(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        started = time.perf_counter()
        for _ in range(2000):
            async with conn.transaction():
                await conn.fetch("SELECT * FROM rq_timers_take_due(1000)")
        print(f"an idle fire round (nothing due): {(time.perf_counter() - started) / 2000 * 1e6:.0f} us")
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> None:
    with OwnBroker(workers=args.workers) as broker:
        async with httpx.AsyncClient(base_url=broker.url, timeout=60,
                                     limits=httpx.Limits(max_connections=64)) as client:
            await sequential(client)
            await kv_sql(broker.database_url)
            await pushes_and_pops(client)
            await timers(client)
            await idle_fire(broker.database_url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
