"""Electing the one process (across all workers and nodes) that runs a background loop.

The election is a lease row: a process holds the loop while it keeps renewing the row; when
it dies the lease expires and another process takes over within ``LEASE_SECONDS``. The row is
the authority, so two processes never run the loop at the same time for longer than a
renewal that is already late. A loop that stops hands its lease back, so another process takes
over at its next tick rather than after the lease runs out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid

from reginamq.common.errors import Unavailable
from reginamq.common.periodic import Periodic
from reginamq.store import Store

LEASE_SECONDS = 15


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
        self.rounds = 0

    async def tick(self) -> None:
        if await take(self._store, self.LEASE_NAME, self._holder):
            await self.round()
            self.rounds += 1

    async def stop(self) -> None:
        await super().stop()
        with contextlib.suppress(Unavailable):  # the database is away: the lease runs out by itself
            await self._store.leadership.release(self.LEASE_NAME, self._holder)

    def pause(self, busy: float) -> float:
        return max(self._interval, busy / self.MAX_DUTY_CYCLE - busy)

    async def round(self) -> dict[str, int]:
        raise NotImplementedError
