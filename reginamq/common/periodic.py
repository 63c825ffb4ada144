"""A background loop of one process: a tick every few seconds for as long as the process runs.

A tick that finds the database away waits for the next one; any other failure is logged and
the loop goes on, so a background job never dies quietly or takes the broker with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from reginamq.common.errors import Unavailable


class Periodic:
    """Subclasses do their work in :meth:`tick`; :meth:`pause` may space ticks out."""

    def __init__(self, interval: float, name: str):
        self._interval = interval
        self._name = name
        self._log = logging.getLogger(f"reginamq.{name}")
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def tick(self) -> None:
        raise NotImplementedError

    def pause(self, busy: float) -> float:
        """Seconds to wait after a tick that took ``busy`` seconds."""
        return self._interval

    async def _forever(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.tick()
            except Unavailable:
                pass  # the database is away; try again next time
            except Exception:
                self._log.exception("%s round failed", self._name)
            await asyncio.sleep(self.pause(time.monotonic() - started))
