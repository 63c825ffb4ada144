"""Pushes a second of producers that wait for each answer before their next push.

    python benchmarks/closed_loop_push.py --url http://127.0.0.1:6632 --producers 1 8 32

``reginamq bench`` is open loop: its pushes leave on a schedule, whatever the broker answers.
Many real producers are closed loop instead (a task pushing in a loop, one request at a time),
and for them every millisecond a push waits in the broker is a push fewer a second. This
measures that side: each of K producers pushes ``--batch`` messages to its own partition and
waits for the answer, for ``--seconds``; it prints pushes and messages a second and the mean
time a push took. Run it against brokers started with different settings (for instance
``--push-flush-spacing-ms``) to see what a setting costs such producers.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import aiohttp


async def closed_loop(url: str, producers: int, seconds: float, batch: int) -> tuple[int, float]:
    """(pushes answered, seconds taken) of ``producers`` closed-loop producers."""
    queue = f"closed-{uuid.uuid4().hex[:8]}"
    answered = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=producers + 4)) as http:
        started = time.monotonic()
        end = started + seconds

        async def producer(index: int) -> None:
            nonlocal answered
            sent = 0
            while time.monotonic() < end:
                items = [{"queue": queue, "partition": f"p{index}", "payload": {"n": sent + i}} for i in range(batch)]
                async with http.post(f"{url}/api/v1/push", json={"items": items}) as response:
                    if response.status != 201:
                        raise RuntimeError(f"push answered {response.status}: {await response.text()}")
                    await response.read()
                sent += batch
                answered += 1

        await asyncio.gather(*(producer(index) for index in range(producers)))
        return answered, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:6632")
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=1, help="messages a push")
    args = parser.parse_args()
    for producers in args.producers:
        pushes, took = asyncio.run(closed_loop(args.url, producers, args.seconds, args.batch))
        print(f"{producers} producer(s), {args.batch} message(s) a push: {pushes / took:,.0f} pushes/s, "
              f"{pushes * args.batch / took:,.0f} msg/s, {producers * took / pushes * 1000:.2f} ms a push")


if __name__ == "__main__":
    main()
