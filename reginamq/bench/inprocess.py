"""The load through the library (``--transport library``) or through nothing (``--transport null``).

The same open-loop producers and closed-loop consumers as :mod:`.load` (its pacer, in-flight
cap, partition rotation and payloads; :mod:`.child`'s reporting), calling a
:class:`reginamq.Broker` in their own process instead of sending HTTP requests: a push is one
``push_items`` call of ``--push-batch`` raw JSON payloads, a pop one ``pop`` (long poll) and an
ack one ``ack`` of the popped messages.

Placement: by default every producer and consumer is a task of **one** process holding one
broker (``one_process_main``); with ``--library-processes`` each producer and consumer process
holds its own broker on the same database (``producer_main``/``consumer_main``), so pushes
wake pops in another process as they would across brokers.

The library runs in the generator's processes, so its CPU is theirs minus the generator's own.
``--transport null`` measures that: the same producers and consumers, in one process, calling
:class:`NullBroker`, which answers every call with ready-made results of the library's types
and hands the consumers as many messages as were pushed. A library run's broker CPU a message
is its processes' CPU a message minus a null run's at the same rate
(benchmarks/library_vs_http.py runs them side by side).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

import msgspec

from reginamq.bench.child import Reporter, child_setup, tally
from reginamq.bench.config import BenchConfig, queue_name
from reginamq.bench.latency import CONSUMER_FIELDS, PRODUCER_FIELDS
from reginamq.bench.load import InflightGate, Pacer, consumer_assignments, open_loop, push_batch_items
from reginamq.library import AckResult, Message, PopResult, PushItem, PushResult

# A library child imports the engine and opens its broker (pools, LISTEN, maintenance) before the
# first instant; several starting at once on a small machine take seconds.
START_DELAY_S = 10.0
# What a library child's broker is given: the environment does not tune it (as the own broker's
# REGINAMQ_* are cleared), and the parent applied the schema before the children start.
BROKER_OPTIONS: dict[str, Any] = {"environ": {}, "apply_schema": False}


class _Stamp(msgspec.Struct):
    s: int  # the scheduled push instant every bench payload starts with (load.push_batch_items)


_stamp = msgspec.json.Decoder(_Stamp).decode


def open_broker(cfg: BenchConfig, database_url: str):
    """The broker the load calls: the library's, or the null one."""
    if cfg.transport == "null":
        return NullBroker(cfg)
    from reginamq.library import Broker  # only in a library run: the null run loads no engine

    return Broker(database_url, **BROKER_OPTIONS)


async def configure(cfg: BenchConfig, database_url: str, queues: list[str]) -> None:
    """Create the queues with the run's options through the library, before any load."""
    if cfg.transport == "null":
        return
    from reginamq.library import Broker

    async with Broker(database_url, environ={}, maintenance=False, process_metrics=False) as broker:
        for name in queues:
            await broker.configure(name, cfg.queue_options())


# ----------------------------------------------------------------------------- entry points


def one_process_main(cfg: BenchConfig, database_url: str, start_ns: int, queue, abort, stop) -> None:
    """Every producer and consumer as tasks of this process, over one broker."""
    child_setup()
    asyncio.run(_run(cfg, database_url, range(cfg.producer_procs), range(cfg.consumer_procs), start_ns, queue,
                     abort, stop))


def producer_main(cfg: BenchConfig, index: int, database_url: str, start_ns: int, queue, abort) -> None:
    child_setup()
    asyncio.run(_run(cfg, database_url, [index], [], start_ns, queue, abort, None))


def consumer_main(cfg: BenchConfig, index: int, database_url: str, start_ns: int, queue, stop) -> None:
    child_setup()
    asyncio.run(_run(cfg, database_url, [], [index], start_ns, queue, None, stop))


def processes(cfg: BenchConfig, context, database_url: str, start_ns: int, reports, abort, stop) -> list:
    """The processes of a library or null run (not started)."""
    if not cfg.library_processes:
        return [context.Process(target=one_process_main, args=(cfg, database_url, start_ns, reports, abort, stop),
                                name="bench-library", daemon=True)]
    out = [context.Process(target=consumer_main, args=(cfg, i, database_url, start_ns, reports, stop),
                           name=f"bench-library-consumer-{i}", daemon=True) for i in range(cfg.consumer_procs)]
    out += [context.Process(target=producer_main, args=(cfg, i, database_url, start_ns, reports, abort),
                            name=f"bench-library-producer-{i}", daemon=True) for i in range(cfg.producer_procs)]
    return out


async def _run(cfg, database_url, producers, consumers, start_ns, queue, abort, stop) -> None:
    async with open_broker(cfg, database_url) as broker:
        await asyncio.gather(*(_produce(cfg, broker, index, start_ns, queue, abort) for index in producers),
                             *(_consume(cfg, broker, index, start_ns, queue, stop) for index in consumers))


# ----------------------------------------------------------------------------- producers


async def _produce(cfg: BenchConfig, broker, index: int, start_ns: int, queue, abort) -> None:
    pacer = Pacer(cfg.rate, cfg.push_batch, cfg.producer_procs, index, start_ns, cfg.duration)
    gate = InflightGate(max(cfg.push_batch, cfg.max_inflight // cfg.producer_procs))
    reporter = Reporter("producer", index, PRODUCER_FIELDS, queue, start_ns, cfg.report)
    sequences = [0] * cfg.space
    tx = 0

    async def push(items: list[PushItem], n: int) -> None:
        reporter.counters["push_reqs"] += 1
        try:
            answered = len(await broker.push_items(items))
            tally(reporter.counters, "push", answered, n)  # the counters of now: a report may have passed
        except Exception:
            tally(reporter.counters, "push", 0, n)
        finally:
            gate.give(n)

    def launch(slot: int, instant: int) -> Coroutine[Any, Any, None]:
        nonlocal tx
        name, partition, txids, payloads = push_batch_items(cfg, index, slot, sequences, instant, tx)
        tx += cfg.push_batch
        items = [PushItem(queue=name, raw=payload.encode(), partition=partition, transaction_id=txid)
                 for txid, payload in zip(txids, payloads, strict=True)]
        return push(items, cfg.push_batch)

    await open_loop(cfg, pacer, gate, reporter, abort, start_ns, launch)


# ----------------------------------------------------------------------------- consumers


async def _consume(cfg: BenchConfig, broker, index: int, start_ns: int, queue, stop) -> None:
    reporter = Reporter("consumer", index, CONSUMER_FIELDS, queue, start_ns, cfg.report)
    report_task = asyncio.create_task(reporter.run())
    await asyncio.gather(*(_consumer(cfg, broker, group, slot, reporter, stop)
                           for group, slot in consumer_assignments(cfg, index)))
    report_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await report_task
    reporter.send(final=True)


async def _consumer(cfg: BenchConfig, broker, group: str | None, slot: int, reporter: Reporter, stop) -> None:
    """One closed-loop drainer, as load._consumer: pop (long poll), record, ack, repeat."""
    name = queue_name(cfg, slot % cfg.queues)
    ack_slots = asyncio.Semaphore(cfg.ack_inflight)
    ack_tasks: set[asyncio.Task] = set()

    async def ack(messages: list[Message]) -> None:
        sent = time.perf_counter_ns()
        n = len(messages)
        try:
            results = await broker.ack(messages, group=group)
            c = reporter.counters
            c["ack_reqs"] += 1
            c["ack_rtt_ns"] += time.perf_counter_ns() - sent
            tally(c, "ack", sum(1 for result in results if result.success), n)
        except Exception:
            tally(reporter.counters, "ack", 0, n)

    async def ack_async(messages: list[Message]) -> None:
        try:
            await ack(messages)
        finally:
            ack_slots.release()

    while not stop.is_set():
        try:
            result = await broker.pop(name, group=group, batch=cfg.pop_batch, partitions=cfg.pop_partitions,
                                      wait=True, timeout_ms=cfg.pop_timeout_ms, subscription_mode="all",
                                      auto_ack=not cfg.manual_ack)
        except Exception:
            reporter.counters["pop_err"] += 1
            await asyncio.sleep(0.1)
            continue
        received = time.monotonic_ns()
        c = reporter.counters
        c["pop_reqs"] += 1
        messages = result.messages
        if not messages:
            c["empty_pops"] += 1
            continue
        n = len(messages)
        c["popped"] += n
        reporter.latency.record_many([(received - _stamp(m.payload).s) // 1000 for m in messages])
        if not cfg.manual_ack:
            c["acked"] += n
            continue
        if cfg.ack_async:
            await ack_slots.acquire()
            task = asyncio.create_task(ack_async(messages))
            ack_tasks.add(task)
            task.add_done_callback(ack_tasks.discard)
        else:
            await ack(messages)
    if ack_tasks:
        await asyncio.wait(list(ack_tasks))


# ----------------------------------------------------------------------------- the null transport


class NullBroker:
    """What the load calls when it measures itself: answers of the library's types, made ready
    before the load, and as many messages delivered as were pushed (their payloads are one
    template, so a null run's latencies mean nothing). One process only: the count is in memory."""

    def __init__(self, cfg: BenchConfig):
        size = max(cfg.push_batch, cfg.pop_batch)
        now = datetime.now(UTC)
        payload = msgspec.Raw(f'{{"s":{time.monotonic_ns()},"p":0,"k":0,"q":0,"x":"{"x" * cfg.payload}"}}'.encode())
        self._messages = [Message(id=f"m{i}", transaction_id=f"t{i}", payload=payload, created_at=now,
                                  queue=cfg.queue, partition="p-000000", partition_id="0", lease_id="lease")
                          for i in range(size)]
        self._pushed = [PushResult(index=i, message_id=f"m{i}", transaction_id=f"t{i}", queue=cfg.queue,
                                   status="queued") for i in range(size)]
        self._acked = [AckResult(index=i, transaction_id=f"t{i}", success=True) for i in range(size)]
        self._pending = 0
        self._arrived = asyncio.Event()

    async def __aenter__(self) -> NullBroker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def push_items(self, items: list[PushItem]) -> list[PushResult]:
        self._pending += len(items)
        self._arrived.set()
        return self._pushed[:len(items)]

    async def pop(self, queue: str, *, batch: int, timeout_ms: int, **_options: Any) -> PopResult:
        if not self._pending:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout_ms / 1000)
        n = min(self._pending, batch)
        self._pending -= n
        return PopResult(queue=queue, messages=self._messages[:n])

    async def ack(self, messages: list[Message], **_options: Any) -> list[AckResult]:
        return self._acked[:len(messages)]
