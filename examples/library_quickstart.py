"""reginamq inside a Python program: no broker process, no HTTP.

Run it with a PostgreSQL URL (``python examples/library_quickstart.py postgresql://...``) or
without one, to use the embedded PostgreSQL in reginamq's data folder.
"""

from __future__ import annotations

import asyncio
import sys

import msgspec

from reginamq import Broker
from reginamq.library import QueueOptions


class Order(msgspec.Struct):
    customer: str
    step: int


async def main(database_url: str | None) -> None:
    async with Broker(database_url) as broker:
        await broker.configure("orders", QueueOptions(lease_time=30, retry_limit=2))

        # Each customer is a partition: ordered within itself, parallel across customers.
        for customer in ("alice", "bob"):
            await broker.push("orders", [{"customer": customer, "step": n} for n in range(3)], partition=customer)

        # Pop and acknowledge by hand.
        popped = await broker.pop("orders", group="billing", subscription_mode="all", batch=10, partitions=2)
        for message in popped.messages:
            print("billing", message.partition, message.decode(Order))
        await broker.ack(popped.messages)

        # Or let a consumer loop ack each message once the next is asked for; an exception in
        # the body fails the message (it comes back after the queue's retryDelay).
        async with broker.consume("orders", group="shipping", subscription_mode="all", limit=6) as messages:
            async for message in messages:
                order = message.decode(Order)
                print("shipping", order.customer, order.step)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
