"""The consumer loop: long polls, messages handed out one at a time, acks sent for them.

A message counts as handled when the loop asks for the next one. The messages of one pop are
acknowledged together once the pop is used up, in one ack call, before the next pop: a consumer
costs one pop and one ack per pop, whatever its batch. When the body of the ``async for``
raises, the loop ends; on the way out the current message is acknowledged ``failed`` (charged
to its retry budget: redelivered after the queue's retryDelay, dead-lettered after its
retryLimit), the ones handled before it ``completed`` and the rest of the pop ``retry``
(released, not charged). To keep going after a failure, the body calls :meth:`Consumer.fail`
(or :meth:`~Consumer.retry`, :meth:`~Consumer.dlq`) and continues; the later messages of that
partition in the pop are then released unhandled, so that the partition's order holds when
they come back.

While a pop has unhandled messages, a renewer extends its lease every ``renew_every`` seconds
(by default half the lease: ``lease_seconds``, or the queue's leaseTime), so a slow handler
keeps its messages; a handler faster than half the lease never renews. A renewal that fails
means the lease is lost: the pop's acknowledgements are skipped (they would be refused) and its
messages come back to whoever pops next.

When the broker closes, a parked pop answers empty at once and the loop ends after the current
body: what was handled is acknowledged, the rest released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Protocol

from reginamq.engine.ack import MAX_ERROR_LENGTH
from reginamq.library.errors import InvalidRequest
from reginamq.library.types import Ack, AckStatus, Message, PopResult, RenewResult

log = logging.getLogger("reginamq.library.consumer")

DEFAULT_LEASE_SECONDS = 60  # what the broker leases for when neither the pop nor the queue says
LEASE_TIMES_REFRESH = 10.0


class Host(Protocol):
    """What a consumer needs of its broker (library/broker.py)."""

    @property
    def closing(self) -> bool: ...

    @property
    def pop(self) -> Callable[..., Awaitable[PopResult]]: ...

    async def renew(self, lease: str, seconds: int) -> RenewResult: ...

    async def _settle(self, acks: list[Ack]) -> None: ...

    async def _lease_time(self, queue: str) -> int: ...

    def _consumer_started(self, consumer: Consumer) -> None: ...

    def _consumer_ended(self, consumer: Consumer) -> None: ...


class LeaseTimes:
    """Per broker: each queue's leaseTime, re-read at most every few seconds, so that a renewer
    knows when a pop's lease runs out without asking the database for every pop."""

    def __init__(self, read: Callable[[], Awaitable[dict[str, int]]]) -> None:
        self._read = read
        self._seconds: dict[str, int] = {}
        self._read_at = -LEASE_TIMES_REFRESH

    async def of(self, queue: str) -> int:
        if queue not in self._seconds or time.monotonic() - self._read_at >= LEASE_TIMES_REFRESH:
            self._seconds = await self._read()
            self._read_at = time.monotonic()
        return self._seconds.get(queue) or DEFAULT_LEASE_SECONDS


class _Count:
    """Messages handled by every loop of one :meth:`Consumer.run`, against its ``limit``."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.handled = 0

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.handled >= self.limit


class Consumer:
    """An async context manager and an async iterator of :class:`Message` (made by
    :meth:`Broker.consume`)."""

    def __init__(self, broker: Host, pop: dict[str, Any], *, wait_ms: int, renew: bool,
                 renew_every: float | None, limit: int | None, idle_seconds: float | None) -> None:
        self._broker = broker
        self._pop_arguments = pop
        self._wait_ms = wait_ms
        self._renew = renew
        self._renew_every = renew_every
        self._count = _Count(limit)
        self._idle_seconds = idle_seconds
        self._popped: PopResult | None = None
        self._waiting: deque[Message] = deque()
        self._current: Message | None = None
        self._outcomes: dict[str, Ack] = {}  # message id -> its acknowledgement, once decided
        self._skipped: set[str] = set()  # partitions whose later messages this pop releases
        self._renewer: asyncio.Task[None] | None = None
        self._lost = False
        self._last_message_at = time.monotonic()
        self._entered = False

    def _sibling(self) -> Consumer:
        twin = Consumer(self._broker, self._pop_arguments, wait_ms=self._wait_ms, renew=self._renew,
                        renew_every=self._renew_every, limit=None, idle_seconds=self._idle_seconds)
        twin._count = self._count
        return twin

    async def __aenter__(self) -> Consumer:
        self._broker._consumer_started(self)
        self._entered = True
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        try:
            current = self._current
            if current is not None and current.id not in self._outcomes:
                if isinstance(error, Exception):
                    self._decide(current, "failed", repr(error)[:MAX_ERROR_LENGTH])
                elif error is not None:  # cancelled or interrupted: not the handler's failure
                    self._decide(current, "retry", None)
            await self._settle()
        finally:
            self._entered = False
            self._broker._consumer_ended(self)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        if not self._entered:
            raise RuntimeError("use the consumer inside `async with`")
        while True:
            if self._current is not None:
                self._count.handled += 1
                self._current = None
            if self._count.reached or self._broker.closing:
                await self._settle()
                raise StopAsyncIteration
            while self._waiting:
                message = self._waiting.popleft()
                if message.partition_id in self._skipped:
                    self._decide(message, "retry", None)
                    continue
                self._current = message
                return message
            await self._settle()
            if not await self._next_pop():
                raise StopAsyncIteration

    async def fail(self, message: Message, error: str | None = None) -> None:
        """The message failed: charged to its retry budget (dead-lettered after retryLimit); the
        later messages of its partition in this pop are released to keep the partition's order."""
        self._decide(message, "failed", error)
        self._skipped.add(message.partition_id)

    async def retry(self, message: Message) -> None:
        """Give the message back unhandled, not charged; its partition's later ones with it."""
        self._decide(message, "retry", None)
        self._skipped.add(message.partition_id)

    async def dlq(self, message: Message, error: str | None = None) -> None:
        """Dead-letter the message at once."""
        self._decide(message, "dlq", error)

    async def run(self, handler: Callable[[Message], Awaitable[object]], concurrency: int = 1) -> int:
        """Hand each message to ``handler`` in ``concurrency`` loops: a return acks it, an
        exception fails it (logged) and the loop goes on. Ends at ``limit``, after
        ``idle_seconds`` without messages, or when the broker closes; answers how many messages
        were handled."""
        if concurrency < 1:
            raise InvalidRequest("concurrency must be at least 1")

        async def loop(consumer: Consumer) -> None:
            async with consumer as messages:
                async for message in messages:
                    try:
                        await handler(message)
                    except Exception as error:
                        log.warning("handler failed on message %s: %r", message.id, error)
                        await messages.fail(message, repr(error)[:MAX_ERROR_LENGTH])

        await asyncio.gather(*(loop(self if n == 0 else self._sibling()) for n in range(concurrency)))
        return self._count.handled

    def _decide(self, message: Message, status: AckStatus, error: str | None) -> None:
        if self._popped is None or all(message is not held for held in self._popped.messages):
            raise InvalidRequest("the message is not one of this consumer's current pop")
        self._outcomes[message.id] = _ack_of(message, status, error)

    async def _next_pop(self) -> bool:
        """Pops until messages come (True), or the loop is over (False)."""
        while True:
            if self._broker.closing or self._count.reached:
                return False
            timeout = self._wait_ms
            if self._idle_seconds is not None:
                left = self._idle_seconds - (time.monotonic() - self._last_message_at)
                if left <= 0:
                    return False
                timeout = min(timeout, max(1, int(left * 1000)))
            popped = await self._broker.pop(**self._pop_arguments, wait=True, timeout_ms=timeout)
            if popped.conflation_conflict:
                raise InvalidRequest("the group's delivery policy differs from the consumer's conflation")
            if popped.messages:
                self._last_message_at = time.monotonic()
                self._popped = popped
                self._waiting.extend(popped.messages)
                if self._renew and popped.lease_id:
                    self._renewer = asyncio.get_running_loop().create_task(self._keep(popped))
                return True

    async def _keep(self, popped: PopResult) -> None:
        """Renew ``popped``'s lease until the task is cancelled; a refusal marks it lost."""
        assert popped.lease_id is not None
        seconds = self._pop_arguments.get("lease_seconds") or await self._broker._lease_time(popped.queue)
        every = self._renew_every or seconds / 2
        while True:
            await asyncio.sleep(every)
            renewed = await self._broker.renew(popped.lease_id, seconds)
            if not renewed.success:
                log.warning("lease %s was lost before its messages were handled: %s", popped.lease_id,
                            renewed.error)
                self._lost = True
                return

    async def _settle(self) -> None:
        """Acknowledge the current pop's messages: decided ones as decided, handled ones
        ``completed``, the rest ``retry``; then forget the pop."""
        popped, self._popped = self._popped, None
        if popped is None:
            return
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        unhandled = {message.id for message in self._waiting}
        acks = [self._outcomes.get(message.id) or _ack_of(message, "retry" if message.id in unhandled else "completed")
                for message in popped.messages]
        self._waiting.clear()
        self._outcomes.clear()
        self._skipped.clear()
        self._current = None
        lost, self._lost = self._lost, False
        if lost or popped.lease_id is None:
            return
        await self._broker._settle(acks)


def _ack_of(message: Message, status: AckStatus, error: str | None = None) -> Ack:
    return Ack(transaction_id=message.transaction_id, partition_id=message.partition_id, lease_id=message.lease_id,
               group=message.consumer_group, status=status, error=error)
