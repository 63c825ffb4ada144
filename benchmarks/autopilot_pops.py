"""The official client's consumers left to the broker's pop autopilot, against pinned sizes.

Two shapes, against a running broker (``--url``):

- sparse: one message in each of 1,000 partitions, drained by 4 consumers popping without
  waiting and acking; the pops it took with autopilot and with ``partitions(1)``;
- dense: 50 messages in each of 200 partitions, drained by ``consume()`` with 8 workers, as a
  program that sets nothing gets it (autopilot), with the sizes the broker used when it ignored
  autopilot (``batch(200).partitions(1)``) and with autopilot off in the client
  (QUEEN_SDK_POP_AUTOPILOT=off: batch 1, partitions 1); the seconds until every message was
  handled.

    python benchmarks/autopilot_pops.py --url http://127.0.0.1:6632
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import httpx
from queen import Queen

SPARSE, SPARSE_CONSUMERS = 1_000, 4
DENSE_PARTITIONS, DENSE_PER_PARTITION, DENSE_WORKERS = 200, 50, 8


async def push(url: str, queue: str, partitions: int, per_partition: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for round_ in range(per_partition):
            items = [{"queue": queue, "partition": f"p{n}", "payload": {"n": n, "round": round_}}
                     for n in range(partitions)]
            assert (await http.post("/api/v1/push", json={"items": items})).status_code == 201


async def sparse_pops(queen: Queen, queue: str, group: str, pinned: bool) -> int:
    pops = 0

    async def consumer() -> None:
        nonlocal pops
        while True:
            builder = queen.queue(queue).group(group).subscription_mode("all").wait(False)
            messages = await (builder.partitions(1) if pinned else builder).pop()
            pops += 1
            if not messages:
                return
            await queen.ack(messages, True, {"group": group})

    await asyncio.gather(*(consumer() for _ in range(SPARSE_CONSUMERS)))
    return pops


async def dense_seconds(url: str, queue: str, group: str, sizes: tuple[int, int] | None, autopilot: bool) -> float:
    total, seen, done = DENSE_PARTITIONS * DENSE_PER_PARTITION, 0, asyncio.Event()
    started = time.monotonic()
    finished = started

    async def handler(messages) -> None:
        nonlocal seen, finished
        seen += len(messages) if isinstance(messages, list) else 1
        if seen >= total and not done.is_set():
            finished = time.monotonic()
            done.set()

    async with Queen(url) as queen:
        builder = queen.queue(queue).group(group).subscription_mode("all").concurrency(DENSE_WORKERS)
        if sizes is not None:
            builder = builder.batch(sizes[0]).partitions(sizes[1])
        await builder.autopilot(autopilot).timeout_millis(500).consume(handler, signal=done)
    return finished - started


async def main(url: str) -> None:
    async with Queen(url) as queen:
        queue = f"ap-sparse-{uuid.uuid4().hex[:6]}"
        await push(url, queue, SPARSE, 1)
        print(f"sparse, {SPARSE} partitions x 1 message, {SPARSE_CONSUMERS} consumers: "
              f"autopilot {await sparse_pops(queen, queue, 'auto', False)} pops, "
              f"partitions(1) {await sparse_pops(queen, queue, 'pinned', True)} pops")
    for label, sizes, autopilot in (("autopilot", None, True), ("batch(200).partitions(1)", (200, 1), True),
                                    ("autopilot off (batch 1, partitions 1)", None, False)):
        queue = f"ap-dense-{uuid.uuid4().hex[:6]}"
        await push(url, queue, DENSE_PARTITIONS, DENSE_PER_PARTITION)
        seconds = await dense_seconds(url, queue, "g", sizes, autopilot)
        print(f"dense, {DENSE_PARTITIONS} partitions x {DENSE_PER_PARTITION}, consume() with {DENSE_WORKERS} "
              f"workers, {label}: {seconds:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:6632")
    asyncio.run(main(parser.parse_args().url))
