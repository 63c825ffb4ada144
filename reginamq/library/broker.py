"""The broker inside an application: ``async with Broker(database_url=...) as broker``.

Every call goes through the engine's one validated path (engine/operations.py), the one the
HTTP routes call, so a call is checked, defaulted and counted exactly as the same request over
HTTP, and refused with the status HTTP would answer (library/errors.py). The library only
shapes Python arguments into the engine's values and the engine's answers into typed results
(library/types.py); nothing is rendered into JSON and parsed back.

Calls made while the broker closes raise :class:`BrokerClosed`; :meth:`Broker.close` answers
parked long polls at once, lets consumers finish their current message, waits for the calls
in flight, then stops the loops, the engine and the embedded PostgreSQL
(library/lifecycle.py). One broker belongs to one event loop; it is not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from reginamq.common.errors import Unavailable as DatabaseAway
from reginamq.config import SettingError, Settings
from reginamq.engine import ack as engine_acks
from reginamq.engine import operations, partial
from reginamq.engine import push as engine_pushes
from reginamq.engine import queues as engine_queues
from reginamq.engine import transaction as engine_transactions
from reginamq.engine.broker import Broker as Engine
from reginamq.library.codec import pop_result, push_items
from reginamq.library.consumer import Consumer, LeaseTimes
from reginamq.library.errors import BrokerClosed, InternalError, InvalidRequest, ReginaError, StartError, translate
from reginamq.library.lifecycle import Runtime
from reginamq.library.types import (
    Ack,
    AckResult,
    AckStatus,
    DeleteResult,
    DlqPage,
    Message,
    PopResult,
    PushItem,
    PushResult,
    QueueConfig,
    QueueOptions,
    RenewResult,
    ReplayResult,
    SubscriptionMode,
    TransactionResult,
)

log = logging.getLogger("reginamq.library")

T = TypeVar("T")


class Broker:
    """A reginamq broker in this process, on PostgreSQL (``database_url``; several URLs for a
    deployment of member databases), or on the embedded PostgreSQL in ``data_dir`` when no URL
    is given here or in the environment.

    ``maintenance=False`` leaves retention, stats, timers and recovery to other brokers on the
    database; ``process_metrics=False`` writes no ``rq_process_metrics`` row for this process;
    ``apply_schema=False`` expects the schema in place. ``environ`` is where ``REGINAMQ_*`` and
    ``PG_*`` settings are read (None: ``os.environ``; ``{}``: nowhere), and ``settings`` are
    any further fields of :class:`reginamq.config.Settings`, held to the same bounds.
    ``producer_sub`` is stamped on every push as ``producerSub`` (what a JWT's ``sub`` is over
    HTTP)."""

    def __init__(self, database_url: str | Sequence[str] | None = None, *, data_dir: Path | str | None = None,
                 maintenance: bool = True, process_metrics: bool = True, apply_schema: bool = True,
                 pool_size: int | None = None, producer_sub: str | None = None,
                 environ: Mapping[str, str] | None = None, **settings: Any) -> None:
        url = database_url if database_url is None or isinstance(database_url, str) else " ".join(database_url)
        self._settings_given: dict[str, Any] = {
            **settings, "database_url": url, "data_dir": None if data_dir is None else Path(data_dir),
            "pool_size": pool_size}
        self._environ = environ
        self._maintenance = maintenance
        self._process_metrics = process_metrics
        self._apply_schema = apply_schema
        self._producer_sub = producer_sub
        self._runtime: Runtime | None = None
        self._engine: Engine | None = None
        self._closing = False
        self._closed: asyncio.Event | None = None
        self._in_flight = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._consumers: set[Consumer] = set()
        self._consumers_done = asyncio.Event()
        self._consumers_done.set()
        self._lease_times: LeaseTimes | None = None

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def settings(self) -> Settings:
        """The settings the broker runs with (after :meth:`start`: its database URLs included)."""
        if self._runtime is None:
            raise BrokerClosed("the broker is not started")
        return self._runtime.settings

    @property
    def closing(self) -> bool:
        return self._closing

    async def start(self) -> None:
        """Start everything (lifecycle.py); :class:`StartError` says on one line why not."""
        if self._runtime is not None or self._closing:
            raise RuntimeError("a Broker starts once")
        try:
            settings = Settings.checked(self._environ, **self._settings_given)
        except SettingError as error:
            raise StartError(str(error)) from error
        self._runtime = Runtime(settings, elected=self._maintenance, process_metrics=self._process_metrics,
                                schema=self._apply_schema)
        self._engine = await self._runtime.start()
        engine = self._engine
        self._lease_times = LeaseTimes(lambda: engine.store.queue_settings.lease_times())

    async def close(self, grace: float = 30.0) -> None:
        """Stop: parked polls answer now, consumers end after their current message, calls in
        flight get up to ``grace`` seconds, then everything stops. A second call waits for the
        first."""
        if self._closed is not None:
            await self._closed.wait()
            return
        self._closed = asyncio.Event()
        self._closing = True
        try:
            if self._engine is not None:
                self._engine.waiters.close()
                await _within(grace, self._consumers_done.wait(), self._quiet.wait())
            if self._runtime is not None:
                await self._runtime.stop()
        finally:
            self._engine = None
            self._closed.set()

    async def healthy(self) -> bool:
        """Whether every database answers now."""
        return await self._call(lambda engine: engine.healthy())

    # The message plane.

    async def push(self, queue: str, payloads: Iterable[Any], *, partition: str = "Default",
                   transaction_ids: Sequence[str | None] | None = None,
                   trace_id: str | None = None) -> list[PushResult]:
        """Push each of ``payloads`` (JSON-encodable values) to one partition of ``queue``, in
        order; ``transaction_ids`` (one per payload, or None for a fresh id) deduplicate."""
        values = list(payloads)
        if transaction_ids is not None and len(transaction_ids) != len(values):
            raise InvalidRequest("transaction_ids must give one id (or None) per payload")
        ids: Sequence[str | None] = transaction_ids or [None] * len(values)
        return await self.push_items([PushItem(queue=queue, data=value, partition=partition, transaction_id=txid,
                                               trace_id=trace_id) for value, txid in zip(values, ids, strict=True)])

    async def push_items(self, items: Sequence[PushItem]) -> list[PushResult]:
        """Push items that may go to several queues and partitions, in one call."""
        async def push(engine: Engine) -> list[dict[str, Any]]:
            return await operations.push(engine, _engine_items(items), self._producer_sub,
                                         connection=id(asyncio.current_task()))

        return msgspec.convert(await self._call(push), list[PushResult])

    async def pop(self, queue: str | None = None, *, partition: str | None = None, namespace: str | None = None,
                  task: str | None = None, group: str | None = None, batch: int | None = None,
                  partitions: int | None = None, wait: bool = False, timeout_ms: int | None = None,
                  lease_seconds: int | None = None, auto_ack: bool = False,
                  subscription_mode: SubscriptionMode | None = None,
                  subscription_from: datetime | Literal["now"] | None = None,
                  conflation: bool | None = None, autopilot: bool = False) -> PopResult:
        """Lease the next messages for ``group`` (None: queue mode) of one partition, of any
        partition of ``queue``, or of a namespace/task selection; with ``wait``, wait up to
        ``timeout_ms`` for them. Nothing to deliver is an empty result."""
        async def pop(engine: Engine) -> PopResult:
            request = operations.pop_request(
                engine.settings, queue=queue, partition=partition, namespace=namespace, task=task, group=group,
                batch=batch, partitions=partitions, wait=wait, timeout_ms=timeout_ms, lease_seconds=lease_seconds,
                auto_ack=auto_ack, subscription_mode=subscription_mode, subscription_from=subscription_from,
                conflation=conflation, autopilot=autopilot)
            return pop_result(await operations.pop(engine, request), request, engine.sealer.reveal)

        return await self._call(pop)

    async def ack(self, messages: Message | Ack | Sequence[Message | Ack], status: AckStatus | bool = "completed", *,
                  error: str | None = None, group: str | None = None) -> list[AckResult]:
        """Acknowledge messages (``status`` True: completed, False: failed) in one call; an
        :class:`Ack` carries its own status. ``group`` stands for acks that name none."""
        given = [messages] if isinstance(messages, (Message, Ack)) else list(messages)
        said = "completed" if status is True else "failed" if status is False else status
        return await self._acks([_engine_ack(item, said, error) for item in given], group)

    async def renew(self, lease: str | Message | PopResult, seconds: int = 60) -> RenewResult:
        """Extend a lease to ``seconds`` from now (never shortened); a lease that expired
        answers ``success=False``."""
        lease_id = lease if isinstance(lease, str) else lease.lease_id
        answer = await self._call(lambda engine: operations.renew(engine, lease_id or "", seconds))
        return msgspec.convert(answer, RenewResult)

    async def transaction(self, *, acks: Sequence[Message | Ack] = (), pushes: Sequence[PushItem] = (),
                          required_leases: Sequence[str] = ()) -> TransactionResult:
        """Acks and pushes that commit together, or not at all (``success=False``, ``reason``);
        with ``required_leases``, only while those leases are live."""
        async def transact(engine: Engine) -> dict[str, Any]:
            operations_ = [engine_transactions.Operation(
                type="ack", transactionId=ack.transactionId, partitionId=ack.partitionId,
                consumerGroup=ack.consumerGroup, leaseId=ack.leaseId, status=ack.status, error=ack.error)
                for ack in (_engine_ack(item, "completed", None) for item in acks)]
            if pushes:
                operations_.append(engine_transactions.Operation(type="push", items=_engine_items(pushes)))
            body = engine_transactions.TransactionBody(operations=operations_,
                                                       requiredLeases=list(required_leases) or None)
            return await operations.transaction(engine, body, self._producer_sub)

        return msgspec.convert(await self._call(transact), TransactionResult)

    async def configure(self, queue: str, options: QueueOptions | Mapping[str, Any] | None = None, *,
                        namespace: str | None = None, task: str | None = None,
                        mode: Literal["merge", "replace"] = "merge") -> QueueConfig:
        """Create or change a queue; ``merge`` keeps the options not given, ``replace`` returns
        them to their defaults. ``options`` may also be a mapping of the wire's camelCase names."""
        given = msgspec.to_builtins(options) if isinstance(options, QueueOptions) else options
        body = engine_queues.ConfigureBody(queue=queue, namespace=namespace, task=task,
                                           options=None if given is None else dict(given), mode=mode)
        return msgspec.convert(await self._call(lambda engine: operations.configure(engine, body)), QueueConfig)

    async def delete_queue(self, queue: str) -> DeleteResult:
        """Delete a queue with its partitions and messages (idempotent: ``deleted`` says whether it was there)."""
        return msgspec.convert(await self._call(lambda engine: operations.delete_queue(engine, queue)), DeleteResult)

    async def dlq(self, queue: str, *, group: str | None = None, partition: str | None = None,
                  since: datetime | None = None, until: datetime | None = None, limit: int = 100,
                  offset: int = 0) -> DlqPage:
        """A page of ``queue``'s dead letters, newest first, with the total of the filtered set."""
        async def page(engine: Engine) -> DlqPage:
            query = operations.dlq_query(queue=queue, group=group, partition=partition, since=since, until=until,
                                         limit=limit, offset=offset)
            with partial.members_left_out() as left_out:
                answer = await operations.dlq_page(engine, query)
            return msgspec.convert({**answer, "members_unreached": left_out}, DlqPage)

        return await self._call(page)

    async def dlq_replay(self, dead_letter_id: str) -> ReplayResult:
        """Put a dead letter back at the end of its partition as a new message (:class:`NotFound`
        once replayed, :class:`Conflict` if its partition is gone)."""
        answer = await self._call(lambda engine: operations.dlq_replay(engine, dead_letter_id))
        return msgspec.convert(answer, ReplayResult)

    async def dlq_purge(self, queue: str, *, group: str | None = None, partition: str | None = None) -> int:
        """Delete ``queue``'s dead letters (of one group, one partition); answers how many."""
        answer = await self._call(lambda engine: operations.dlq_purge(engine, queue=queue, group=group,
                                                                      partition=partition))
        return int(answer["deleted"])

    def consume(self, queue: str | None = None, *, partition: str | None = None, namespace: str | None = None,
                task: str | None = None, group: str | None = None, batch: int | None = None,
                partitions: int | None = None, wait_ms: int = 30_000, lease_seconds: int | None = None,
                subscription_mode: SubscriptionMode | None = None,
                subscription_from: datetime | Literal["now"] | None = None, conflation: bool | None = None,
                renew: bool = True, renew_every: float | None = None, limit: int | None = None,
                idle_seconds: float | None = None) -> Consumer:
        """A consumer loop (library/consumer.py): ``async with broker.consume(...) as messages:
        async for message in messages: ...``, or ``await broker.consume(...).run(handler)``.
        Without ``batch`` and ``partitions``, the broker sizes each pop (autopilot)."""
        pop = {"queue": queue, "partition": partition, "namespace": namespace, "task": task, "group": group,
               "batch": batch, "partitions": partitions, "lease_seconds": lease_seconds,
               "subscription_mode": subscription_mode, "subscription_from": subscription_from,
               "conflation": conflation, "autopilot": batch is None and partitions is None}
        return Consumer(self, pop, wait_ms=wait_ms, renew=renew, renew_every=renew_every, limit=limit,
                        idle_seconds=idle_seconds)

    # What consumers use.

    async def _acks(self, acks: list[engine_acks.Ack], group: str | None, settling: bool = False) -> list[AckResult]:
        answer = await self._call(lambda engine: operations.ack(engine, acks, group), settling=settling)
        return msgspec.convert(answer, list[AckResult])

    async def _settle(self, acks: list[Ack]) -> None:
        """A consumer's acknowledgements of its pop: taken even while the broker closes."""
        await self._acks([_engine_ack(ack, ack.status, ack.error) for ack in acks], None, settling=True)

    async def _lease_time(self, queue: str) -> int:
        if self._lease_times is None:
            raise BrokerClosed("the broker is not started")
        times = self._lease_times
        return await self._call(lambda _engine: times.of(queue), settling=True)

    def _consumer_started(self, consumer: Consumer) -> None:
        if self._closing:
            raise BrokerClosed("the broker is closing")
        self._consumers.add(consumer)
        self._consumers_done.clear()

    def _consumer_ended(self, consumer: Consumer) -> None:
        self._consumers.discard(consumer)
        if not self._consumers:
            self._consumers_done.set()

    async def _call(self, work: Callable[[Engine], Awaitable[T]], settling: bool = False) -> T:
        """Run one call on the engine: refused once closing (unless a consumer settles what it
        was handed), counted in the meter and the in-flight count, its failures translated."""
        engine = self._engine
        if engine is None or (self._closing and not settling):
            raise BrokerClosed("the broker is closed" if engine is None else "the broker is closing")
        self._in_flight += 1
        self._quiet.clear()
        engine.meter.in_flight += 1
        try:
            return await work(engine)
        except ReginaError:
            raise
        except DatabaseAway as error:
            operations.unavailable(engine)
            raise translate(error) from None
        except Exception as error:
            translated = translate(error)
            if isinstance(translated, InternalError):
                log.exception("unhandled error in a library call")
                raise translated from error
            raise translated from None
        finally:
            engine.meter.in_flight -= 1
            engine.meter.requests += 1
            self._in_flight -= 1
            if not self._in_flight:
                self._quiet.set()


def _engine_items(items: Sequence[PushItem]) -> list[engine_pushes.PushItem]:
    """The engine's push items, their payloads held to the strict JSON an HTTP body is held to."""
    prepared = push_items(items)
    operations.check_payloads([bytes(item.payload) for item in prepared])
    return prepared


def _engine_ack(item: Message | Ack, status: str, error: str | None) -> engine_acks.Ack:
    if isinstance(item, Message):
        return engine_acks.Ack(transactionId=item.transaction_id, partitionId=item.partition_id,
                               consumerGroup=item.consumer_group, leaseId=item.lease_id, status=status, error=error)
    return engine_acks.Ack(transactionId=item.transaction_id, partitionId=item.partition_id,
                           consumerGroup=item.group, leaseId=item.lease_id, status=item.status, error=item.error)


async def _within(seconds: float, *waits: Awaitable[object]) -> None:
    """Wait for all of ``waits``, at most ``seconds``."""
    try:
        await asyncio.wait_for(asyncio.gather(*waits), seconds)
    except TimeoutError:
        log.warning("closing with calls or consumers still running after %s s", seconds)
