"""Fusion: concurrent requests of one process share one store call and one commit.

While a call is in flight, newly arriving requests wait in a queue; the next call takes them
all (up to a cap on their items) and applies them together. The batch therefore grows with
load instead of being configured, and the fixed cost of a call (round trip, function entry,
statement set-up, commit, the notices after it) is paid once per call rather than once per
request. Each request still gets its own answer, and only once the call that holds it has
committed.

Two requests that touch the same key (a push's (queue, partition, transactionId), an ack's
(partition, consumer group)) never share a call: the later one waits for the next, so it sees
what the first one did, exactly as if they had come one after the other. Requests with no key
in common commute, so applying them in one call is the same as applying them in turn.

Subclasses say what a request's keys and size are, and how a batch is written and answered
(push_fusion.py, ack_fusion.py); a subclass may also hold a call back for a while
(``_wait_for_turn``) so that more requests join it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

import msgspec

Request = TypeVar("Request")
Columns = TypeVar("Columns", bound=msgspec.Struct)


def concatenated(parts: list[Columns], columns: tuple[str, ...]) -> Columns:
    """The ``columns`` (list fields) of several requests one after the other, as one call's; the
    struct's other fields are left empty."""
    if len(parts) == 1:
        return parts[0]
    kind = type(parts[0])
    merged = kind(**{name: [] for name in kind.__struct_fields__})
    for part in parts:
        for name in columns:
            getattr(merged, name).extend(getattr(part, name))
    return merged


class Fusion(Generic[Request]):
    max_items: int = 5_000  # items of one call, unless a single request holds more
    max_flights: int = 2  # calls of the process in flight at once

    def __init__(self) -> None:
        # each waiting request with its answer's future and whether it counts as independent
        # (a subclass's notion: push_fusion.py counts requests that did not wait for an answer)
        self._pending: deque[tuple[Request, asyncio.Future, bool]] = deque()
        self._in_flight = 0
        self._flights: set[asyncio.Task] = set()

    def _enqueue(self, request: Request, independent: bool = False) -> asyncio.Future:
        """Queue ``request``; a call takes it soon (one starts if fewer than ``max_flights``
        are in flight). The future settles with its answer or its error."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((request, future, independent))
        self._queued(independent)
        if self._in_flight < self.max_flights:
            self._in_flight += 1
            flight = loop.create_task(self._flush_while_pending())
            self._flights.add(flight)  # a task nobody refers to may be collected mid-flight
            flight.add_done_callback(self._flights.discard)
        return future

    async def _flush_while_pending(self) -> None:
        try:
            while self._pending:
                await self._wait_for_turn()
                batch = self._take()
                if batch:  # another flight may have taken everything meanwhile
                    await self._flush_or_fail(batch)
        finally:
            self._in_flight -= 1

    async def _flush_or_fail(self, batch: list[tuple[Request, asyncio.Future]]) -> None:
        """:meth:`_flush`; what it raises is every unanswered request's answer."""
        try:
            await self._flush(batch)
        except BaseException as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise

    def _take(self) -> list[tuple[Request, asyncio.Future]]:
        """The next call's requests, in arrival order: up to ``max_items`` items, none sharing a
        key with an earlier one of the call (those stay first in the queue for the next)."""
        batch: list[tuple[Request, asyncio.Future]] = []
        taken_keys: set[Hashable] = set()
        deferred: deque[tuple[Request, asyncio.Future, bool]] = deque()
        items = 0
        while self._pending and items < self.max_items:
            entry = self._pending.popleft()
            request, future, independent = entry
            if future.done():  # the request went away before its turn
                self._left(independent)
                continue
            keys = self._keys(request)
            size = self._size(request)
            if batch and (keys & taken_keys or items + size > self.max_items):
                deferred.append(entry)
                continue
            batch.append((request, future))
            self._left(independent)
            taken_keys |= keys
            items += size
        self._pending.extendleft(reversed(deferred))
        if batch:
            self._took(len(batch))
        return batch

    # What a subclass says.

    def _keys(self, request: Request) -> set[Hashable]:
        raise NotImplementedError

    def _size(self, request: Request) -> int:
        raise NotImplementedError

    async def _flush(self, batch: list[tuple[Request, asyncio.Future]]) -> None:
        """Apply the batch in one call and answer its requests (an error raised here answers
        every request not answered yet)."""
        raise NotImplementedError

    async def _wait_for_turn(self) -> None:
        """Hold the next call back (by default it goes at once)."""

    def _queued(self, independent: bool) -> None:
        """A request joined the queue."""

    def _left(self, independent: bool) -> None:
        """A request left the queue (taken into a call, or gone before its turn)."""

    def _took(self, requests: int) -> None:
        """A call was formed of ``requests`` (one or more) requests."""
