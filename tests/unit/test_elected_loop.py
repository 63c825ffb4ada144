"""The elected loop's pacing: a round that grows with the data spaces the rounds out."""

from __future__ import annotations

import asyncio
import time

from reginamq.maintenance.leader import ElectedLoop
from reginamq.store import Store
from tests.conftest import eventually


class LeaseAlwaysOurs:
    """An executor that grants every lease asked of it."""

    async def fetchval(self, sql, *args):
        return True


class SlowRounds(ElectedLoop):
    LEASE_NAME = "test"
    MAX_DUTY_CYCLE = 0.25

    def __init__(self, round_seconds: float):
        super().__init__(Store(LeaseAlwaysOurs()), interval=0.01)
        self.round_seconds = round_seconds
        self.started: list[float] = []

    async def round(self) -> dict[str, int]:
        self.started.append(time.monotonic())
        await asyncio.sleep(self.round_seconds)
        return {}

    async def has_started(self, rounds: int) -> bool:
        return len(self.started) >= rounds


async def test_slow_rounds_take_at_most_their_duty_cycle():
    loop = SlowRounds(round_seconds=0.1)
    loop.start()
    assert await eventually(lambda: loop.has_started(3))
    await loop.stop()
    gaps = [b - a for a, b in zip(loop.started, loop.started[1:], strict=False)]
    assert gaps and min(gaps) >= 0.1 / 0.25 * 0.95  # a 0.1 s round every 0.4 s, not every 0.11 s


async def test_fast_rounds_keep_the_interval():
    loop = SlowRounds(round_seconds=0.0)
    loop.start()
    assert await eventually(lambda: loop.has_started(10))
    await loop.stop()
    assert len(loop.started) >= 10
