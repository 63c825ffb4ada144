"""The load: open-loop producer processes and closed-loop consumer processes.

Producers follow Queen's goload ``-mode openloop``: a pacer holds a fixed schedule of push
instants, each push is launched at its instant as its own task without waiting for the one
before, a push is never retried, and a push that would take the messages in flight over
``--max-inflight`` is *shed* (counted, never sent, never queued). Every message carries its
scheduled instant, so a consumer's latency is measured from when the message *should* have been
sent (coordinated-omission corrected), not from when an overloaded generator got round to it.
Every instant is on the monotonic clock, which all processes of one machine share: a step of
the wall clock (a time sync) must not read as seconds of latency or a burst of missed pushes.

Consumers are closed loop: pop, record, ack, pop again. Each process keeps its own counters and
histogram and sends the difference to the parent every report interval over a multiprocessing
queue; see :mod:`reginamq.bench.child` and :mod:`reginamq.bench.latency`. Under ``--verify`` the
same processes run :mod:`reginamq.bench.verify`'s accounting instead of the plain push and
drain below.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import orjson
import uuid_utils

from reginamq.bench import verify
from reginamq.bench.child import Reporter, child_setup, tally, timed_pop
from reginamq.bench.config import BenchConfig, locate, namespace_task, partition_name, queue_name
from reginamq.bench.latency import CONSUMER_FIELDS, PRODUCER_FIELDS
from reginamq.http import binary_push, pop_frames

JSON_HEADERS = {"Content-Type": "application/json"}
BINARY_HEADERS = {"Content-Type": binary_push.CONTENT_TYPE}
PAD = "x" * 1_048_576
FILL_WORDS = ("order", "customer", "pending", "shipped", "paid", "refund", "item", "sku", "price", "quantity",
              "warehouse", "express", "standard", "invoice", "address", "street", "city", "note", "gift", "return")


def _text(size: int) -> str:
    """Words and numbers, as the free text of real records reads: it compresses like text, not
    like a run of one letter. The same on every process (fixed seed)."""
    rng = random.Random(20_261_205)
    parts, length = [], 0
    while length < size:
        part = rng.choice(FILL_WORDS) if rng.random() < 0.7 else str(rng.randrange(1_000_000))
        parts.append(part)
        length += len(part) + 1
    return " ".join(parts)


TEXT = _text(2 * 1_048_576)


class Pacer:
    """The fixed schedule of one producer process among ``procs``.

    Push number ``g`` of the whole generator is due at ``start + g * batch / rate``; process
    ``index`` owns the pushes with ``g % procs == index``, so the instants of all processes
    interleave into one evenly spaced schedule at the offered rate.
    """

    def __init__(self, rate: float, batch: int, procs: int, index: int, start_ns: int, duration_s: float):
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.step_ns = batch * 1e9 / rate
        self.procs = procs
        self.index = index
        self.start_ns = start_ns
        self.end_ns = start_ns + int(duration_s * 1e9)
        self.k = 0  # this process's next push

    def global_index(self, k: int) -> int:
        return k * self.procs + self.index

    def instant(self, k: int) -> int:
        return self.start_ns + int(self.global_index(k) * self.step_ns)

    def next_instant(self) -> int | None:
        """The next scheduled instant, or ``None`` when the schedule is over."""
        instant = self.instant(self.k)
        return instant if instant < self.end_ns else None

    def due(self, now_ns: int) -> list[tuple[int, int]]:
        """``(global push index, scheduled instant)`` of every push due by ``now_ns``.

        A late pacer gets all the pushes it missed at once, each with its own scheduled instant:
        being late must show up as latency, not as a lower offered rate.
        """
        out = []
        while True:
            instant = self.instant(self.k)
            if instant > now_ns or instant >= self.end_ns:
                return out
            out.append((self.global_index(self.k), instant))
            self.k += 1


class InflightGate:
    """Caps the messages in flight; what would go over the cap is shed, never queued."""

    def __init__(self, limit: int):
        self.limit = limit
        self.inflight = 0

    def try_take(self, n: int) -> bool:
        if self.inflight + n > self.limit:
            return False
        self.inflight += n
        return True

    def give(self, n: int) -> None:
        self.inflight -= n


def partition_of(cfg: BenchConfig, push_index: int, instant_ns: int, start_ns: int) -> int:
    """Which slot of the space (see :func:`~reginamq.bench.config.locate`) a push goes to: round
    robin over the active window, which moves on by ``active`` slots every ``rotate_seconds`` so
    the whole space gets covered."""
    if cfg.active >= cfg.space:
        return push_index % cfg.space
    window = max(0, instant_ns - start_ns) // int(cfg.rotate_seconds * 1e9)
    return (window * cfg.active + push_index % cfg.active) % cfg.space


# ----------------------------------------------------------------------------- producers


def producer_main(cfg: BenchConfig, index: int, url: str, start_ns: int, queue, abort) -> None:
    child_setup()
    asyncio.run(_produce(cfg, index, url, start_ns, queue, abort))


# How the bench names a message, as the clients a user runs would: the store a key lands in,
# and so its cost, depends on its form (store/dedup_keys.py).
TRANSACTION_IDS: dict[str, Callable[[BenchConfig, int, int], str]] = {
    "counter": lambda cfg, producer, count: f"{cfg.run_id}-{producer}-{count}",
    "uuid4": lambda cfg, producer, count: str(uuid.uuid4()),
    "uuid7": lambda cfg, producer, count: str(uuid_utils.uuid7()),
}


def push_batch_items(cfg: BenchConfig, producer: int, slot: int, sequences: list[int], scheduled_ns: int,
                     first_tx: int) -> tuple[str, str, list[str], list[str]]:
    """One push of ``push_batch`` messages to one slot of the space: queue, partition, and each
    message's transactionId and payload, built as text (no per-message dicts).

    Payload ``{"s": scheduled ns, "p": producer, "k": slot, "q": per-slot sequence, "x":
    padding}`` is padded to ``--payload`` bytes (``--payload-fill``: one letter repeated, or
    words and numbers from a different place of :data:`TEXT` each message); the sequence
    fields let a verifier check loss and order later. transactionIds are unique per message, so dedup never fires
    (``--transaction-ids``: :data:`TRANSACTION_IDS`).
    """
    queue, partition = locate(cfg, slot)
    seq = sequences[slot]
    txids, payloads = [], []
    text = cfg.payload_fill == "text"
    for i in range(cfg.push_batch):
        head = f'{{"s":{scheduled_ns},"p":{producer},"k":{slot},"q":{seq + i},"x":"'
        pad = max(0, cfg.payload - len(head) - 2)
        start = (seq + i) * 7_919 % (len(TEXT) - pad) if text else 0
        txids.append(TRANSACTION_IDS[cfg.transaction_ids](cfg, producer, first_tx + i))
        payloads.append(f'{head}{TEXT[start:start + pad] if text else PAD[:pad]}"}}')
    sequences[slot] = seq + cfg.push_batch
    return queue_name(cfg, queue), partition_name(partition), txids, payloads


def build_push_body(cfg: BenchConfig, producer: int, slot: int, sequences: list[int],
                    scheduled_ns: int, first_tx: int) -> bytes:
    """The request body of one push: JSON, or with ``--binary-push`` queen-mq's binary push body
    (transactionIds, counts answer; reginamq/http/binary_push.py)."""
    queue, partition, txids, payloads = push_batch_items(cfg, producer, slot, sequences, scheduled_ns, first_tx)
    if cfg.binary_push:
        return binary_push.encode_push(queue, partition, txids, [payload.encode() for payload in payloads],
                                       counts=True)
    prefix = f'{{"queue":"{queue}","partition":"{partition}","transactionId":"'
    items = [f'{prefix}{txid}","payload":{payload}}}' for txid, payload in zip(txids, payloads, strict=True)]
    return ('{"items":[' + ",".join(items) + "]}").encode()


async def _produce(cfg: BenchConfig, index: int, url: str, start_ns: int, queue, abort) -> None:
    pacer = Pacer(cfg.rate, cfg.push_batch, cfg.producer_procs, index, start_ns, cfg.duration)
    share = max(cfg.push_batch, cfg.max_inflight // cfg.producer_procs)
    gate = InflightGate(share)
    reporter = Reporter("producer", index, PRODUCER_FIELDS, queue, start_ns, cfg.report)
    sequences = [0] * cfg.space
    push_url = f"{url}/api/v1/push"
    push_headers = BINARY_HEADERS if cfg.binary_push else JSON_HEADERS
    tx = 0
    connector = aiohttp.TCPConnector(limit=512, force_close=False)
    timeout = aiohttp.ClientTimeout(total=cfg.push_timeout)

    if cfg.verify:
        ledger, chains, verify_stats = verify.Ledger(), verify.PartitionChains(), verify.new_stats()
        retrier = verify.Retrier(verify_stats, "push", cfg.retry_seconds)

        def handover(final: bool) -> dict:
            payload = {"stats": dict(verify_stats)}
            verify_stats.clear()
            if final:
                payload.update(producer=index, ledger=ledger.export())
            return payload

        reporter.extra = handover

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def verified(body: bytes, n: int, partition: int, first: int) -> None:
            c = reporter.counters
            c["push_reqs"] += 1
            try:
                try:
                    accepted = await chains.run(
                        partition, lambda: verify.verified_push(session, push_url, body, n, retrier, push_headers))
                except Exception:
                    accepted = [False] * n
                ledger.record(partition, first, n, accepted)
                tally(reporter.counters, "push", sum(accepted), n)
            finally:
                gate.give(n)

        async def push(body: bytes, n: int) -> None:
            c = reporter.counters
            c["push_reqs"] += 1
            try:
                async with session.post(push_url, data=body, headers=push_headers) as response:
                    raw = await response.read()
                    ok = 0 if response.status != 201 else accepted(orjson.loads(raw))
                    tally(reporter.counters, "push", ok, n)
            except Exception:
                tally(reporter.counters, "push", 0, n)
            finally:
                gate.give(n)

        with contextlib.suppress(Exception):  # warm the pool up before the first instant
            async with session.get(f"{url}/health") as response:
                await response.read()
        def launch(slot: int, instant: int) -> Coroutine[Any, Any, None]:
            nonlocal tx
            first = sequences[slot]
            body = build_push_body(cfg, index, slot, sequences, instant, tx)
            tx += cfg.push_batch
            if cfg.verify:  # one queue: the slot is the partition
                return verified(body, cfg.push_batch, slot, first)
            return push(body, cfg.push_batch)

        await open_loop(cfg, pacer, gate, reporter, abort, start_ns, launch)


async def open_loop(cfg: BenchConfig, pacer: Pacer, gate: InflightGate, reporter: Reporter, abort, start_ns: int,
                    launch: Callable[[int, int], Coroutine[Any, Any, None]]) -> None:
    """A producer's open loop, whatever carries its pushes: each push at its instant without
    waiting for the earlier ones (``launch(slot, instant)`` makes it), shed when it would take the
    messages in flight past the producer's share, until the pacer's last instant or an abort;
    then the pushes in flight are awaited and the final report sent."""
    tasks: set[asyncio.Task] = set()
    report_task = asyncio.create_task(reporter.run())
    while not abort.is_set():
        now = time.monotonic_ns()
        for push_index, instant in pacer.due(now):
            c = reporter.counters
            c["offered"] += cfg.push_batch
            reporter.pacer_lag_max_ns = max(reporter.pacer_lag_max_ns, now - instant)
            if not gate.try_take(cfg.push_batch):
                c["shed"] += cfg.push_batch
                continue
            task = asyncio.create_task(launch(partition_of(cfg, push_index, instant, start_ns), instant))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        upcoming = pacer.next_instant()
        if upcoming is None:
            break
        await asyncio.sleep(max(0.0, min((upcoming - time.monotonic_ns()) / 1e9, 0.05)))
    if tasks:
        await asyncio.wait(list(tasks))
    report_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await report_task
    reporter.send(final=True)


# ----------------------------------------------------------------------------- consumers


def consumer_assignments(cfg: BenchConfig, proc: int) -> list[tuple[str | None, int]]:
    """The (group, consumer slot) pairs this consumer process runs: round robin over processes."""
    pairs = [(group, slot) for group in cfg.group_names for slot in range(cfg.consumers)]
    return pairs[proc::cfg.consumer_procs]


def consumer_main(cfg: BenchConfig, index: int, url: str, start_ns: int, queue, stop) -> None:
    child_setup()
    asyncio.run(_consume(cfg, index, url, start_ns, queue, stop))


async def _consume(cfg: BenchConfig, index: int, url: str, start_ns: int, queue, stop) -> None:
    reporter = Reporter("consumer", index, CONSUMER_FIELDS, queue, start_ns, cfg.report)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=cfg.pop_timeout_ms / 1000 + 30)
    if cfg.verify:
        sink = verify.RecordSink()
        reporter.extra = lambda final: sink.export()
        report_task = asyncio.create_task(reporter.run())
        await verify.consume(cfg, url, index, reporter, stop, sink)
        report_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await report_task
        reporter.send(final=True)
        return
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        report_task = asyncio.create_task(reporter.run())
        workers = [asyncio.create_task(_consumer(cfg, session, url, group, slot, reporter, stop))
                   for group, slot in consumer_assignments(cfg, index)]
        await asyncio.gather(*workers)
        report_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await report_task
        reporter.send(final=True)


async def _consumer(cfg: BenchConfig, session, url: str, group: str | None, slot: int,
                    reporter: Reporter, stop) -> None:
    """One closed-loop drainer: pop, record the latencies, ack (sync or async), repeat.

    Under --queues consumer ``slot`` long-polls queue ``slot % queues`` only (one long poll
    parked on one queue cannot hear the others), or with --pop-namespace all of them at once.
    """
    params = {"batch": str(cfg.pop_batch), "subscriptionMode": "all"}
    if cfg.framed_pop:
        params["frames"] = "true"
    if group is not None:
        params["consumerGroup"] = group
    if not cfg.manual_ack:
        params["autoAck"] = "true"
    if cfg.per_partition:
        mine = list(range(slot, cfg.partitions, cfg.consumers))
        params.update(wait="false")
        pop_urls = [f"{url}/api/v1/pop/queue/{cfg.queue}/partition/{partition_name(p)}" for p in mine]
    else:
        params.update(wait="true", timeout=str(cfg.pop_timeout_ms), partitions=str(cfg.pop_partitions))
        pop_urls = [f"{url}/api/v1/pop/queue/{queue_name(cfg, slot % cfg.queues)}"]
        if cfg.pop_namespace:
            namespace, task = namespace_task(cfg)
            params.update({"namespace": namespace} | ({"task": task} if task else {}))
            pop_urls = [f"{url}/api/v1/pop"]
    ack_url = f"{url}/api/v1/ack/batch"
    ack_slots = asyncio.Semaphore(cfg.ack_inflight)
    ack_tasks: set[asyncio.Task] = set()
    position = 0
    empty_streak = 0

    async def ack(body: bytes, n: int) -> None:
        sent = time.perf_counter_ns()
        try:
            async with session.post(ack_url, data=body, headers=JSON_HEADERS) as response:
                raw = await response.read()
                c = reporter.counters
                c["ack_reqs"] += 1
                c["ack_rtt_ns"] += time.perf_counter_ns() - sent
                ok = 0 if response.status != 200 else sum(1 for item in orjson.loads(raw) if item.get("success"))
                tally(c, "ack", ok, n)
        except Exception:
            tally(reporter.counters, "ack", 0, n)

    async def ack_async(body: bytes, n: int) -> None:
        try:
            await ack(body, n)
        finally:
            ack_slots.release()

    while not stop.is_set():
        pop_url = pop_urls[position]
        position = (position + 1) % len(pop_urls)
        answer = await timed_pop(session, pop_url, params, reporter.counters)
        if answer is None:
            await asyncio.sleep(0.1)
            continue
        status, raw, received = answer
        c = reporter.counters
        if status == 204:
            empty_streak += 1
            if cfg.per_partition and empty_streak >= len(pop_urls):
                empty_streak = 0
                await asyncio.sleep(0.01)
            continue
        if status != 200:
            c["pop_err"] += 1
            await asyncio.sleep(0.1)
            continue
        empty_streak = 0
        messages = (pop_frames.decode(raw) if pop_frames.is_framed(raw) else orjson.loads(raw))["messages"]
        n = len(messages)
        c["popped"] += n
        reporter.latency.record_many([(received - m["data"]["s"]) // 1000 for m in messages])
        if not cfg.manual_ack:
            c["acked"] += n  # the pop committed them (server auto-ack)
            continue
        body = orjson.dumps({"consumerGroup": group, "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "completed"} for m in messages]})
        if cfg.ack_async:
            await ack_slots.acquire()  # an ack is never shed: the consumer waits instead
            task = asyncio.create_task(ack_async(body, n))
            ack_tasks.add(task)
            task.add_done_callback(ack_tasks.discard)
        else:
            await ack(body, n)
    if ack_tasks:
        await asyncio.wait(list(ack_tasks))


def accepted(answer) -> int:
    """The items a 201 push answer took: every item but the failed ones, listed (JSON body) or
    counted (the binary body's counts answer)."""
    if isinstance(answer, dict):
        return answer["count"] - answer["error"]
    return sum(1 for item in answer if item.get("status") != "failed")
