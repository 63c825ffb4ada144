"""Push fusion: concurrent push requests of one process share one rq_push call (fusion.py:
one statement and one commit for all of them, the partition lock round paid once).

With a ``spacing`` (``--push-flush-spacing-ms``; 0 = off), flushes also
start at least that far apart while independent requests come together. Every call is followed
by a wake-up, a pop and an ack, so under open-loop load fewer, fuller calls cut all three.
Producers that wait for each answer before their next push are recognised by their requests
following their own connection's answer at once; once all of a cohort of them is back, its
flush goes without waiting, so they are not held to one push per spacing.

A request is acknowledged only after the commit that holds its messages (or, with the
database away, after the spool has fsynced it). Two requests naming the same (queue, partition,
transactionId) never share a flush, so deduplication sees the first one stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from reginamq.common.errors import QueueFull, Refused, Unavailable
from reginamq.engine import push
from reginamq.engine.encryption import Sealer
from reginamq.engine.fusion import Fusion, concatenated
from reginamq.engine.spool import Spool
from reginamq.store import Store

# Connections whose last push answer is remembered, at most (older answers are forgotten first).
MAX_CONNECTIONS_NOTED = 4_096
RECONNECT_PAUSES = (0.02, 0.2)


class PushFusion(Fusion[push.PreparedPush]):
    def __init__(self, store: Store, sealer: Sealer, spool: Spool | None, spacing: float):
        super().__init__()
        self._store = store
        # Also how soon after its connection's last push answer a request follows that answer
        # (its producer waited for it). One spacing, not half: producers sharing one event loop
        # (the official client's usual shape) take a while to all send again, and counted within
        # half a spacing many of their requests would pass for independent ones and wait; load
        # that does not wait is still caught by the count.
        self._spacing = spacing
        self._next_start = 0.0
        self._last_batch = 0
        self._sealer = sealer
        self._spool = spool
        self._answered_at: dict[object, float] = {}  # connection -> when its last push was answered
        self._independent = 0  # waiting requests that did not follow their connection's answer
        self._back = asyncio.Event()  # set when a cohort of producers that wait is back

    async def push(self, prepared: push.PreparedPush, connection: object = None) -> list[dict]:
        """``connection`` (the client's address and port) tells whether this request follows
        its own connection's last answer at once, as a producer's that waits for each answer."""
        if self._spool is not None and self._spool.pending():
            return self._spool.append(prepared)  # behind what waits there, to keep order
        answered = self._answered_at.get(connection) if connection is not None else None
        future = self._enqueue(prepared, answered is None or time.monotonic() - answered > self._spacing)
        try:
            return await future
        except QueueFull as error:
            raise push.refusal(prepared, error) from None
        finally:
            if connection is not None and self._spacing:
                self._note_answer(connection)

    def _note_answer(self, connection: object) -> None:
        now = time.monotonic()
        if len(self._answered_at) >= MAX_CONNECTIONS_NOTED:
            horizon = now - self._spacing
            self._answered_at = {key: at for key, at in self._answered_at.items() if at >= horizon}
        self._answered_at[connection] = now

    def _queued(self, independent: bool) -> None:
        self._independent += independent
        if self._spacing and self._cohort_back():
            self._back.set()

    def _left(self, independent: bool) -> None:
        self._independent -= independent

    def _took(self, requests: int) -> None:
        self._last_batch = requests

    def _keys(self, request: push.PreparedPush) -> set:
        return push.keys(request)

    def _size(self, request: push.PreparedPush) -> int:
        return len(request.queues)

    def _cohort_back(self) -> bool:
        """Every waiting request followed its own connection's last answer (within a
        spacing), and as many wait as the last flush carried: producers that wait for each
        answer are all back, and nobody else is coming."""
        return self._independent == 0 and len(self._pending) >= self._last_batch

    async def _wait_for_turn(self) -> None:
        """Keep flush starts ``spacing`` apart while requests come together (more than one
        waits, or the last flush took more than one), unless the waiting ones are a cohort of
        producers that wait for each answer, all back: nothing else would join their flush, and
        waiting would hold each of them to one push per spacing. A flight waiting for its turn
        goes as soon as such a cohort is complete, and gives its slot back. Load that does not
        wait for answers keeps arriving, and the wait makes its flushes fewer and fuller. The
        slot is reserved before sleeping, so two flights take successive slots."""
        if not self._spacing:
            return
        now = time.monotonic()
        together = len(self._pending) > 1 or self._last_batch > 1
        start = max(now, self._next_start) if together and not self._cohort_back() else now
        self._next_start = start + self._spacing
        if start > now:
            self._back.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._back.wait(), start - now)
                self._next_start = time.monotonic() + self._spacing  # went early: the slot is free

    async def _write(self, merged: push.PreparedPush) -> dict[int, str]:
        """A lost connection is often just that one connection (a restarted backend, a killed
        session): try fresh ones briefly before falling back to the spool."""
        for pause in RECONNECT_PAUSES:
            try:
                return await push.execute(self._store, merged, self._sealer)
            except Unavailable:
                await asyncio.sleep(pause)
        return await push.execute(self._store, merged, self._sealer)

    async def _flush(self, batch) -> None:
        merged = concatenated([prepared for prepared, _ in batch], push.COLUMNS)
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
                    await self._flush_or_fail([request])
            elif not batch[0][1].done():
                batch[0][1].set_exception(refused)
            return
        offset = 0
        for prepared, future in batch:
            size = len(prepared.queues)
            if not future.done():
                mine = {column - offset: original for column, original in duplicates.items()
                        if offset <= column < offset + size}
                future.set_result(push.answer(prepared, mine))
            offset += size
