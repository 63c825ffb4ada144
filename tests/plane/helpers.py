"""Helpers of the two-driver suite: pops that do not wait, written against :class:`Plane`."""

from __future__ import annotations

import asyncio
import time

from reginamq.library import Message
from tests.plane.driver import Plane


async def pop_now(plane: Plane, queue: str, **options) -> list[Message]:
    """One pop that does not wait (a named group reads from the beginning unless told)."""
    if options.get("group") is not None:
        options.setdefault("subscription_mode", "all")
    options.setdefault("batch", 200)
    return (await plane.pop(queue, **options)).messages


async def pop_until(plane: Plane, queue: str, seconds: float = 10.0, **options) -> list[Message]:
    """Pop without waiting until something comes back or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while True:
        messages = await pop_now(plane, queue, **options)
        if messages or time.monotonic() > deadline:
            return messages
        await asyncio.sleep(0.1)


def data(messages: list[Message]) -> list:
    return [message.data for message in messages]
