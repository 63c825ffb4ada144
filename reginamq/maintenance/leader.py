"""Electing the one process (across all workers and nodes) that runs a background loop.

The election is a lease row: a process holds the loop while it keeps renewing the row; when
it dies the lease expires and another process takes over within ``LEASE_SECONDS``. The row is
the authority, so two processes never run the loop at the same time for longer than a
renewal that is already late.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid

from reginamq.common.errors import Unavailable
from reginamq.common.periodic import Periodic
from reginamq.store import Store

LEASE_SECONDS = 15
# How long a stopping loop tries to give its lease back; past that, the lease runs out by itself.
RELEASE_SECONDS = 2.0


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def take(store: Store, name: str, holder: str) -> bool:
    return await store.leadership.take(name, holder, LEASE_SECONDS)


class ElectedLoop(Periodic):
    """A background loop every process runs and only the lease holder acts in.

    Subclasses name their lease (``LEASE_NAME``) and do their work in :meth:`round`.
    """

    LEASE_NAME = ""
    # At most this share of the time in rounds: a round that grows with the data (a refresh
    # over a million partitions) spaces the rounds out instead of occupying a core.
    MAX_DUTY_CYCLE = 1.0

    def __init__(self, store: Store, interval: float):
        super().__init__(interval, self.LEASE_NAME)
        self._store = store
        self._holder = holder_id()
        self._holding = False
        self.rounds = 0

    async def tick(self) -> None:
        self._holding = await take(self._store, self.LEASE_NAME, self._holder)
        if self._holding:
            await self.round()
            self.rounds += 1

    async def stop(self) -> None:
        """Stop, and give the lease back: another process takes the loop over at its next tick,
        not ``LEASE_SECONDS`` later. A database that is away keeps it until it runs out."""
        await super().stop()
        if self._holding:
            with contextlib.suppress(Unavailable, TimeoutError):
                async with asyncio.timeout(RELEASE_SECONDS):
                    await self._store.leadership.release(self.LEASE_NAME, self._holder)
            self._holding = False

    def pause(self, busy: float) -> float:
        return max(self._interval, busy / self.MAX_DUTY_CYCLE - busy)

    async def round(self) -> dict[str, int]:
        raise NotImplementedError
