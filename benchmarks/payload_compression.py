"""What the payload compression of ``--payload-compression`` costs a push, by payload kind.

Calls rq_push directly over one connection, as the broker calls it for a fused flush (8
partitions × 100 messages a call), on an embedded PostgreSQL of its own in a temporary folder,
once for each storage method and payload kind. Kinds: ``x`` (a run of one letter, as the
bench pads), ``json`` (order-like records with varied fields), ``hex`` (random bytes as hex).
Prints the CPU the PostgreSQL backend spent a message (its own CPU time between two readings,
not the wall clock, so the client's work and other processes do not count) and the bytes a
message took in the table. The methods alternate, twice, as the machine drifts.

    python benchmarks/payload_compression.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import uuid_utils

from reginamq.bench.system import cpu_seconds
from reginamq.store.columns import join_names, join_uuids
from reginamq.store.dedup_keys import join_buckets
from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.messages import PUSH_SQL
from reginamq.store.schema import apply_schema

PARTITIONS, PER_PARTITION = 8, 100
METHODS = ("pglz", "none", "pglz", "none")
WORDS = ("order", "customer", "pending", "shipped", "paid", "refund", "item", "sku", "price", "quantity",
         "warehouse", "express")
STORED_SQL = ("SELECT avg(pg_column_size(payloads)) FROM (SELECT payloads FROM rq_segments "
              "WHERE partition_id IN (SELECT id FROM rq_partitions WHERE queue_id = "
              "(SELECT id FROM rq_queues WHERE name = $1))) s")


def payload(kind: str, rng: random.Random) -> bytes:
    if kind == "x":
        return b'{"s":1,"p":0,"k":3,"q":77,"x":"' + b"x" * 200 + b'"}'
    if kind == "hex":
        return b'{"s":1,"pad":"' + rng.randbytes(100).hex().encode() + b'"}'
    return (f'{{"orderId":{rng.randrange(10**9)},"customer":"c-{rng.randrange(10**6):06d}",'
            f'"status":"{rng.choice(WORDS)}","items":[{{"sku":"{rng.choice(WORDS)}-{rng.randrange(10**4)}",'
            f'"qty":{rng.randrange(1, 9)},"price":{rng.random() * 100:.2f}}},{{"sku":"{rng.choice(WORDS)}-'
            f'{rng.randrange(10**4)}","qty":{rng.randrange(1, 9)},"price":{rng.random() * 100:.2f}}}],'
            f'"note":"{rng.choice(WORDS)} {rng.choice(WORDS)}","ts":"2026-12-05T08:{rng.randrange(60):02d}:'
            f'{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z"}}').encode()


def call_arguments(queue: str, kind: str, call: int, rng: random.Random, random_keys: bool = False) -> tuple:
    """rq_push's arguments for one call; each transactionId is its message's id (a UUIDv7, as
    the broker mints for an item without one) or, with ``random_keys``, a UUIDv4 (what the
    Python client sends by default)."""
    ids = [str(uuid_utils.uuid7()) for _ in range(PARTITIONS * PER_PARTITION)]
    txids = [str(uuid.uuid4()) for _ in ids] if random_keys else ids
    fragments = [b'"id":"' + i.encode() + b'","transactionId":"' + t.encode() + b'","traceId":null,"data":'
                 + payload(kind, rng) + b',"producerSub":null' for i, t in zip(ids, txids, strict=True)]
    groups = ",".join(str(g + 1) for g in range(PARTITIONS) for _ in range(PER_PARTITION))
    partitions = [f"p{(call * PARTITIONS + g) % 200}" for g in range(PARTITIONS)]
    return [queue] * PARTITIONS, partitions, groups, join_names(txids), join_buckets(txids), join_uuids(ids), \
        fragments, "{}", True


async def push_cpu(conn: asyncpg.Connection, queue: str, kind: str, calls: int, rng: random.Random) -> float:
    """``calls`` rq_push calls into ``queue`` (a tenth of them first, unmeasured): PostgreSQL
    CPU a message, in µs (the backend's own CPU time)."""
    return await statement_cpu(conn, PUSH_SQL, [call_arguments(queue, kind, call, rng) for call in range(calls)])


async def statement_cpu(conn: asyncpg.Connection, statement: str, prepared: list) -> float:
    """``statement`` run once with each of ``prepared`` (a tenth of them first, unmeasured),
    each a call of ``PARTITIONS`` × ``PER_PARTITION`` items: PostgreSQL CPU an item, in µs (the
    backend's own CPU time, so the client's work and other processes do not count)."""
    warmup = max(1, len(prepared) // 10)
    for arguments in prepared[:warmup]:
        await conn.fetch(statement, *arguments)
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    started = cpu_seconds(backend)
    for arguments in prepared[warmup:]:
        await conn.fetch(statement, *arguments)
    return (cpu_seconds(backend) - started) / ((len(prepared) - warmup) * PARTITIONS * PER_PARTITION) * 1e6


@contextlib.contextmanager
def embedded_server(prefix: str) -> Iterator[str]:
    """An embedded PostgreSQL in a temporary folder, for the block; yields its URL."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        server = EmbeddedPostgres(Path(folder) / "pgdata")
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


async def measure(url: str, method: str, kind: str, calls: int, run: int) -> tuple[float, float]:
    await apply_schema(url, method)
    queue = f"pc-{method}-{kind}-{run}"
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("INSERT INTO rq_queues (name, options) VALUES ($1, '{\"dedupWindowSeconds\": 0}')", queue)
        micros = await push_cpu(conn, queue, kind, calls, random.Random(7))
        stored = float(await conn.fetchval(STORED_SQL, queue)) / PER_PARTITION
    finally:
        await conn.close()
    return micros, stored


async def main(calls: int) -> None:
    with embedded_server("reginamq-compression-") as url:
        for kind in ("x", "json", "hex"):
            for run, method in enumerate(METHODS):
                micros, stored = await measure(url, method, kind, calls, run)
                print(f"{kind:5} {method:5} {micros:6.2f} µs of PostgreSQL CPU a message, "
                      f"{stored:5.0f} bytes stored a message")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
