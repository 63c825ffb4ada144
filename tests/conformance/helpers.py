"""Helpers for driving the broker through the official client (the conformance suite, and any
test elsewhere that needs a real `queen.Queen`)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import time

from queen import Queen


def make_client(url: str, **options) -> Queen:
    """Build the client the way /work/shared/checks/queen_client_smoke.py does (plus ``options``)."""
    kwargs = dict(options)
    if "handle_signals" in inspect.signature(Queen.__init__).parameters:
        kwargs["handle_signals"] = False
    return Queen(url, **kwargs)


@contextlib.asynccontextmanager
async def open_client(url: str, **options):
    """A client for the block; pytest's signal handlers are put back when it closes."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    client = make_client(url, **options)
    try:
        yield client
    finally:
        await client.close()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


async def create_queue(queen: Queen, name: str, **options) -> dict:
    """`queen.queue(name).config({...}).create()`; returns the broker's answer."""
    return await queen.queue(name).config(options).create()


async def pop_now(queen: Queen, name: str, *, group: str | None = None, batch: int = 200,
                  partition: str | None = None) -> list[dict]:
    """One non-waiting pop through the client (a named group reads from the beginning)."""
    builder = queen.queue(name)
    if partition is not None:
        builder = builder.partition(partition)
    if group is not None:
        # explicit, so these tests do not depend on the broker's default subscription mode
        builder = builder.group(group).subscription_mode("all")
    return await builder.batch(batch).wait(False).pop()


async def drain(queen: Queen, name: str, *, group: str | None = None, batch: int = 50,
                rounds: int = 100) -> list[dict]:
    """Pop and ack (completed) until a pop comes back empty; returns everything popped."""
    seen: list[dict] = []
    for _ in range(rounds):
        messages = await pop_now(queen, name, group=group, batch=batch)
        if not messages:
            return seen
        seen.extend(messages)
        result = await queen.ack(messages, True, {"group": group} if group else None)
        assert result["success"] is True, result
    raise AssertionError(f"queue {name} did not drain in {rounds} rounds")


async def pop_until(queen: Queen, name: str, *, seconds: float = 10.0, **kwargs) -> list[dict]:
    """Pop (without waiting) until something comes back or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        messages = await pop_now(queen, name, **kwargs)
        if messages or time.monotonic() > deadline:
            return messages
        await asyncio.sleep(0.1)


async def dlq_rows(db, name: str) -> list:
    return await db.fetch(
        """SELECT d.transaction_id, d.consumer_group, d.error_message, d.retry_count
             FROM rq_dlq d JOIN rq_queues q ON q.id = d.queue_id
            WHERE q.name = $1 ORDER BY d.failed_at""",
        name,
    )
