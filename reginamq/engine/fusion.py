"""Push fusion: concurrent push requests of one process share one rq_push call.

While a flush is in flight, newly arriving pushes wait in a queue; the next flush takes them
all (up to a cap) and writes them in one statement and one commit. The batch therefore grows
with load instead of being configured, and the fixed cost of a call (round trip, procedure
entry, partition lock round, commit) is paid once per flush rather than once per request.

With a ``spacing`` (``--push-flush-spacing-ms``, off by default), flushes also start at
least that far apart while requests come together; a producer sending one push after the
other never waits. Every call is followed by a wake-up, a pop and an ack, so under open-loop
load fewer, fuller calls cut all three: over ten minutes at 35,000 msg/s broker + PostgreSQL
took 1.15–1.17 cores with 10 ms against 1.33 without. But a producer that waits for each
answer before its next push then gets at most one push per spacing (eight such producers:
800 pushes a second at 10 ms, 2,413 without), hence off by default (docs/benchmarks.md,
"Push writes spaced apart").

Each request still gets its own answer, and a request is acknowledged only after the commit
that holds its messages (or, with the database away, after the spool has fsynced it). Two
requests naming the same (queue, partition, transactionId) never share a flush: the later one
waits for the next, so deduplication sees the first one stored.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from reginamq.engine import push
from reginamq.engine.errors import QueueFull, Refused, Unavailable
from reginamq.engine.sealing import Sealer
from reginamq.engine.spool import Spool

MAX_ITEMS_PER_FLUSH = 5_000
MAX_FLUSHES_IN_FLIGHT = 2
RECONNECT_PAUSES = (0.02, 0.2)


class PushFusion:
    def __init__(self, run, sealer: Sealer, spool: Spool | None, spacing: float):
        self._run = run
        self._spacing = spacing
        self._next_start = 0.0
        self._last_batch = 0
        self._sealer = sealer
        self._spool = spool
        self._pending: deque[tuple[push.PreparedPush, asyncio.Future]] = deque()
        self._in_flight = 0

    async def push(self, prepared: push.PreparedPush) -> list[dict]:
        if self._spool is not None and self._spool.pending():
            return self._spool.append(prepared)  # behind what waits there, to keep order
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prepared, future))
        if self._in_flight < MAX_FLUSHES_IN_FLIGHT:
            self._in_flight += 1
            asyncio.get_running_loop().create_task(self._flush_while_pending())
        try:
            return await future
        except QueueFull as error:
            raise push.refusal(prepared, error) from None

    async def _flush_while_pending(self) -> None:
        try:
            while self._pending:
                await self._wait_for_turn()
                batch = self._take()
                self._last_batch = len(batch)
                await self._flush(batch)
        finally:
            self._in_flight -= 1

    async def _wait_for_turn(self) -> None:
        """Keep flush starts ``spacing`` apart while requests come together (more than one
        waits, or the last flush took more than one). A producer pushing one request after the
        other never waits: nothing would join its flush, and it would be held to one push per
        spacing. The slot is reserved before sleeping, so two flights take successive slots."""
        if not self._spacing:
            return
        now = time.monotonic()
        together = len(self._pending) > 1 or self._last_batch > 1
        start = max(now, self._next_start) if together else now
        self._next_start = start + self._spacing
        if start > now:
            await asyncio.sleep(start - now)

    def _take(self) -> list[tuple[push.PreparedPush, asyncio.Future]]:
        batch, taken_keys, deferred, items = [], set(), deque(), 0
        while self._pending and items < MAX_ITEMS_PER_FLUSH:
            prepared, future = self._pending.popleft()
            if future.done():  # the request went away before its turn
                continue
            request_keys = push.keys(prepared)
            if batch and (request_keys & taken_keys or items + len(prepared.queues) > MAX_ITEMS_PER_FLUSH):
                deferred.append((prepared, future))
                continue
            batch.append((prepared, future))
            taken_keys |= request_keys
            items += len(prepared.queues)
        self._pending.extendleft(reversed(deferred))
        return batch

    async def _write(self, merged: push.PreparedPush) -> dict[int, str]:
        """A lost connection is often just that one connection (a restarted backend, a killed
        session): try fresh ones briefly before falling back to the spool."""
        for pause in RECONNECT_PAUSES:
            try:
                return await self._run(lambda conn: push.execute(conn, merged, self._sealer))
            except Unavailable:
                await asyncio.sleep(pause)
        return await self._run(lambda conn: push.execute(conn, merged, self._sealer))

    async def _flush(self, batch) -> None:
        if not batch:
            return
        merged = push.merge([prepared for prepared, _ in batch])
        try:
            duplicates = await self._write(merged)
        except Unavailable as error:
            for prepared, future in batch:
                if not future.done():
                    try:
                        if self._spool is None:
                            raise error
                        future.set_result(self._spool.append(prepared))
                    except Exception as failure:  # the spool too could not keep it: not acknowledged
                        future.set_exception(failure)
            return
        except Refused as refused:
            if len(batch) > 1:
                # One request's full queue must not refuse the others it was fused with.
                for request in batch:
                    await self._flush([request])
            elif not batch[0][1].done():
                batch[0][1].set_exception(refused)
            return
        except BaseException as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        offset = 0
        for prepared, future in batch:
            size = len(prepared.queues)
            if not future.done():
                mine = {column - offset: original for column, original in duplicates.items()
                        if offset <= column < offset + size}
                future.set_result(push.answer(prepared, mine))
            offset += size
