"""``reginamq bench --verify``: per-message accounting of a run.

Every message carries ``p`` (producer process), ``k`` (partition index) and ``q`` (that
producer's sequence inside that partition). Under ``--verify``:

* a producer never has two pushes to the same partition in flight (a push waits for the one
  before it to the same partition, so a partition's store order is the sequence order), retries
  a push that got a 5xx or no answer (same body, same transactionIds: the dedup window makes the
  retry idempotent), and keeps a compact **ledger** per partition: how many sequences it sent and
  the few that were not confirmed (``accepted`` = sent minus unconfirmed; ``buffered`` counts as
  accepted);
* a consumer acknowledges every batch, retries an ack whose outcome it does not know, and hands
  the parent one small **record** per pop: (group, partition, receive instant, consumer,
  deliveryAttempt, runs of ``(p, first q, last q, ack outcome)``);
* the parent's :class:`Verifier` replays the records of each (group, partition) in receive
  order -- leases make deliveries of one partition to one group mutually exclusive, so receive
  instants on one machine order them causally -- keeping per producer only the highest sequence
  seen, the last one seen, the skipped ones and the ones whose last delivery was not acked.

The counters, per group: **lost** (accepted, never acked), **duplicates** (deliveries of a
sequence already delivered, by cause: the earlier delivery's lease expired or its ack was never
sent -- ``lease`` --, its ack failed -- ``failed_ack`` --, or it had been acked -- ``other``, a
broker bug), **reordered** (a sequence delivered after a later one, a repeat that does not
restart a span, or an accepted sequence skipped), **phantoms** (delivered but never sent).

``--pipeline-stages N`` runs Queen's ordered pipeline: stage i pops queue ``i-1`` and, in ONE
``POST /api/v1/transaction`` (with ``requiredLeases``), acks what it popped and pushes a copy to
queue ``i`` with the derived transactionId ``<txid>.s<i>``; the verifying consumers read the last
queue, so a message lost, duplicated or reordered by any stage shows up there.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import defaultdict

import aiohttp
import orjson

from reginamq.bench.child import tally, timed_pop
from reginamq.bench.config import BenchConfig, partition_name, queue_names

# The ack outcome of one delivery. RETRIED: acked, but only after a retry (the first attempt got
# a 5xx or no answer), so the lease may have expired and the span been redelivered meanwhile.
OK, LEASE, FAILED, NONE, RETRIED = 0, 1, 2, 3, 4
OUTCOME_NAMES = {OK: "acked", LEASE: "lease refused", FAILED: "ack failed", NONE: "never acked",
                 RETRIED: "acked after a failed attempt"}
JSON_HEADERS = {"Content-Type": "application/json"}
QUEUE_MODE_NAME = "__QUEUE_MODE__"


def stage_queue(cfg: BenchConfig, stage: int) -> str:
    """Queue ``0`` takes the producers' pushes; stage ``i`` writes queue ``i``."""
    return cfg.queue if stage == 0 else f"{cfg.queue}-s{stage}"


def all_queues(cfg: BenchConfig) -> list[str]:
    """The producers' queues (--queues), then each pipeline stage's."""
    return queue_names(cfg) + [stage_queue(cfg, i) for i in range(1, cfg.pipeline_stages + 1)]


class Retrier:
    """Retries of one request kind; every 5xx and every request that had no answer is counted,
    and so is every request that still failed when the retry budget ran out."""

    def __init__(self, stats: dict, kind: str, seconds: float):
        self.stats, self.kind, self.seconds = stats, kind, seconds

    async def call(self, send):
        """``send()`` returns (status, raw) or raises; retry 5xx/transport errors for a while.
        Returns (status, raw, unsure) -- ``unsure``: an earlier attempt may have been applied."""
        deadline = time.monotonic() + self.seconds
        unsure = False
        delay = 0.1
        while True:
            try:
                status, raw = await send()
            except Exception:
                self.stats[f"{self.kind}_no_answer"] += 1
                status, raw = None, b""
            else:
                if status < 500:
                    if unsure:
                        self.stats[f"{self.kind}_fixed_by_retry"] += 1
                    return status, raw, unsure
                self.stats[f"{self.kind}_5xx"] += 1
            unsure = True
            if time.monotonic() + delay > deadline:
                self.stats[f"{self.kind}_gave_up"] += 1
                return status, raw, unsure
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def new_stats() -> dict:
    return defaultdict(int)


# ----------------------------------------------------------------------------- producer side


class Ledger:
    """What one producer process sent: per partition, the count of sequences sent and the
    (few) sequences that were not confirmed -- a compact accepted set."""

    def __init__(self):
        self.sent: dict[int, int] = {}
        self.unconfirmed: dict[int, list[int]] = defaultdict(list)

    def record(self, partition: int, first: int, count: int, accepted: list[bool]) -> None:
        self.sent[partition] = max(self.sent.get(partition, 0), first + count)
        self.unconfirmed[partition].extend(first + i for i, ok in enumerate(accepted) if not ok)

    def export(self) -> dict:
        return {k: (n, sorted(self.unconfirmed.get(k, ()))) for k, n in self.sent.items()}


class PartitionChains:
    """At most one push per partition in flight: a push waits for the previous one."""

    def __init__(self):
        self.tails: dict[int, asyncio.Future] = {}

    async def run(self, partition: int, coroutine_factory):
        previous = self.tails.get(partition)
        done = asyncio.get_running_loop().create_future()
        self.tails[partition] = done
        try:
            if previous is not None:
                await previous
            return await coroutine_factory()
        finally:
            done.set_result(None)
            if self.tails.get(partition) is done:
                del self.tails[partition]


async def verified_push(session, push_url: str, body: bytes, n: int, retrier: Retrier,
                        headers: dict[str, str]) -> list[bool]:
    """One push with retries; which of its ``n`` messages were accepted (queued, buffered, or a
    duplicate of an earlier attempt). A counts answer (the binary body) covers all of them:
    a push is taken or refused whole."""
    async def send():
        async with session.post(push_url, data=body, headers=headers) as response:
            return response.status, await response.read()

    status, raw, _unsure = await retrier.call(send)
    if status != 201:
        return [False] * n
    answer = orjson.loads(raw)
    if isinstance(answer, dict):
        for name in ("buffered", "duplicate"):
            retrier.stats[f"push_{name}"] += answer.get(name, 0)
        return [answer["count"] == n and answer["error"] == 0] * n
    statuses = [item.get("status") for item in answer]
    for name in ("buffered", "duplicate"):
        if (count := statuses.count(name)):
            retrier.stats[f"push_{name}"] += count
    return [status in ("queued", "buffered", "duplicate") for status in statuses]


# ----------------------------------------------------------------------------- consumer side


class RecordSink:
    """One consumer process's records and request counters, handed to the parent each tick."""

    def __init__(self):
        self.records: list[tuple] = []
        self.stats = new_stats()

    def add(self, group: str | None, messages: list[dict], outcomes: list[int], received_ns: int,
            consumer: str) -> None:
        by_partition: dict[str, list] = {}
        for message, outcome in zip(messages, outcomes, strict=True):
            by_partition.setdefault(message["partition"], []).append((message, outcome))
        for name, items in by_partition.items():
            runs: list[list[int]] = []
            for message, outcome in items:
                data = message["data"]
                p, q = data.get("p", -1), data.get("q", -1)
                if partition_name(data.get("k", -1)) != name:
                    p = -1  # in the wrong partition: a phantom there
                if runs and runs[-1][0] == p and runs[-1][2] + 1 == q and runs[-1][3] == outcome:
                    runs[-1][2] = q
                else:
                    runs.append([p, q, q, outcome])
            attempt = items[0][0].get("deliveryAttempt") or 1
            self.records.append((group or QUEUE_MODE_NAME, name, received_ns, consumer, attempt,
                                 [tuple(run) for run in runs]))

    def export(self) -> dict:
        out = {"records": self.records, "stats": dict(self.stats)}
        self.records = []
        self.stats.clear()  # in place: the retriers hold this dict
        return out


async def ack_messages(session, url: str, group: str | None, messages: list[dict], retrier: Retrier) -> list[int]:
    """Ack a batch ``completed``; the outcome of each message. An ack whose outcome was unknown
    (no answer, 5xx) and whose retry is then refused for its lease is asked once more without
    the lease: below the cursor that is a no-op success (the first attempt was applied)."""
    def body(with_lease: bool) -> bytes:
        return orjson.dumps({"consumerGroup": group, "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             **({"leaseId": m["leaseId"]} if with_lease else {}), "status": "completed"} for m in messages]})

    async def post(data: bytes):
        async with session.post(f"{url}/api/v1/ack/batch", data=data, headers=JSON_HEADERS) as response:
            return response.status, await response.read()

    status, raw, unsure = await retrier.call(lambda: post(body(True)))
    if status != 200:
        return [FAILED] * len(messages)
    outcomes = [OK if item.get("success") else (LEASE if "lease" in (item.get("error") or "") else FAILED)
                for item in orjson.loads(raw)]
    if unsure and any(o == LEASE for o in outcomes):
        status, raw, _ = await retrier.call(lambda: post(body(False)))
        if status == 200:
            again = orjson.loads(raw)
            outcomes = [OK if (o == OK or item.get("success")) else o for o, item in zip(outcomes, again, strict=True)]
    if unsure:
        outcomes = [RETRIED if o == OK else FAILED for o in outcomes]
    return outcomes


async def stage_transaction(session, url: str, stage: int, target_queue: str, messages: list[dict],
                            retrier: Retrier, stats: dict) -> list[int]:
    """Stage ``stage``: ack the popped messages and push their copies in one transaction."""
    lease = messages[0]["leaseId"]
    items = [{"queue": target_queue, "partition": m["partition"], "transactionId": f"{m['transactionId']}.s{stage}",
              "payload": {**m["data"], "st": stage}} for m in messages]
    acks = [{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "leaseId": m["leaseId"], "status": "completed"} for m in messages]
    body = orjson.dumps({"operations": [*acks, {"type": "push", "items": items}], "requiredLeases": [lease]})

    async def send():
        async with session.post(f"{url}/api/v1/transaction", data=body, headers=JSON_HEADERS) as response:
            return response.status, await response.read()

    status, raw, unsure = await retrier.call(send)
    if status != 200:
        return [FAILED] * len(messages)
    answer = orjson.loads(raw)
    if answer.get("success"):
        return [OK] * len(messages)
    stats[f"stage_rollback_{answer.get('reason')}"] += 1
    if unsure:  # an earlier attempt may have committed: then the retry is refused, which is fine
        stats["stage_unsure"] += 1
    return [LEASE if answer.get("reason") == "lease_expired" else FAILED] * len(messages)


def verify_assignments(cfg: BenchConfig, proc: int) -> list[tuple[int, str | None, int]]:
    """(stage, group, slot) of this consumer process: pipeline stages first (stage >= 1), then
    the verifying consumers of the last queue (stage 0 marks them)."""
    pairs = [(stage, None, slot) for stage in range(1, cfg.pipeline_stages + 1) for slot in range(cfg.consumers)]
    pairs += [(0, group, slot) for group in cfg.group_names for slot in range(cfg.consumers)]
    return pairs[proc::cfg.consumer_procs]


async def consume(cfg: BenchConfig, url: str, proc: int, reporter, stop, sink: RecordSink) -> None:
    """Every consumer of this process; each one restarts with a fresh session after a crash."""
    workers = [asyncio.create_task(_restarting(cfg, url, f"{proc}.{stage}.{group}.{slot}", stage, group,
                                               reporter, stop, sink))
               for stage, group, slot in verify_assignments(cfg, proc)]
    await asyncio.gather(*workers)


async def _restarting(cfg, url, name, stage, group, reporter, stop, sink) -> None:
    incarnation = 0
    while not stop.is_set():
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=cfg.pop_timeout_ms / 1000 + 30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            crashed = await _consumer(cfg, session, url, f"{name}#{incarnation}", stage, group, reporter, stop, sink)
        if not crashed:
            return
        incarnation += 1
        sink.stats["consumer_crashes"] += 1
        await asyncio.sleep(0.2)  # a new consumer process would take a moment to come up


async def _consumer(cfg, session, url, consumer, stage, group, reporter, stop, sink: RecordSink) -> bool:
    """Pop, ack (or run the stage's transaction), record. True when it crashed on purpose."""
    source = stage_queue(cfg, stage - 1) if stage else stage_queue(cfg, cfg.pipeline_stages)
    params = {"batch": str(cfg.pop_batch), "wait": "true", "timeout": str(cfg.pop_timeout_ms),
              "partitions": "1", "subscriptionMode": "all"}
    if group is not None:
        params["consumerGroup"] = group
    pop_url = f"{url}/api/v1/pop/queue/{source}"
    retrier = Retrier(sink.stats, "ack" if not stage else "transaction", cfg.retry_seconds)
    pops = 0
    while not stop.is_set():
        answer = await timed_pop(session, pop_url, params, reporter.counters)
        if answer is None:
            sink.stats["pop_no_answer"] += 1
            await asyncio.sleep(0.1)
            continue
        status, raw, received = answer
        c = reporter.counters
        if status == 204:
            continue
        if status != 200:
            c["pop_err"] += 1
            if status >= 500:
                sink.stats["pop_5xx"] += 1
            await asyncio.sleep(0.1)
            continue
        messages = orjson.loads(raw)["messages"]
        if not messages:
            continue
        pops += 1
        if cfg.crash_after_pops and pops % cfg.crash_after_pops == 0 and stage == 0:
            # Crash mid-batch: the batch is never acked and this consumer goes away.
            sink.add(group, messages, [NONE] * len(messages), received, consumer)
            c["popped"] += len(messages)
            return True
        c["popped"] += len(messages)
        if stage == 0:
            reporter.latency.record_many([(received - m["data"]["s"]) // 1000 for m in messages])
            sent = time.perf_counter_ns()
            outcomes = await ack_messages(session, url, group, messages, retrier)
            c = reporter.counters  # a report tick may have handed the old dict over meanwhile
            c["ack_reqs"] += 1
            c["ack_rtt_ns"] += time.perf_counter_ns() - sent
            tally(c, "ack", sum(1 for o in outcomes if o in (OK, RETRIED)), len(messages))
            sink.add(group, messages, outcomes, received, consumer)
        else:
            outcomes = await stage_transaction(session, url, stage, stage_queue(cfg, stage), messages, retrier,
                                               sink.stats)
            sink.stats[f"stage{stage}_forwarded"] += sum(1 for o in outcomes if o == OK)
    return False


# ----------------------------------------------------------------------------- the parent


class SeqSet:
    """A set of sequences: everything below ``prefix``, plus ``extra`` above it."""

    __slots__ = ("extra", "prefix")

    def __init__(self):
        self.prefix = 0
        self.extra: set[int] = set()

    def add_range(self, first: int, last: int) -> None:
        if last < self.prefix:
            return
        if first <= self.prefix:
            self.prefix = last + 1
        else:
            self.extra.update(range(first, last + 1))
        while self.prefix in self.extra:
            self.extra.discard(self.prefix)
            self.prefix += 1
        if self.extra and min(self.extra) < self.prefix:
            self.extra = {q for q in self.extra if q >= self.prefix}

    def __contains__(self, q: int) -> bool:
        return q < self.prefix or q in self.extra


class _Track:
    """The verifier's state for one (group, partition, producer)."""

    __slots__ = ("gaps", "hi", "last", "unacked")

    def __init__(self):
        self.hi = -1  # highest sequence delivered
        self.last = -1  # the sequence delivered last
        self.gaps: list[int] = []  # sorted: skipped, never delivered (yet)
        self.unacked: dict[int, int] = {}  # sequence -> outcome of its last delivery, when not OK

    def skipped_between(self, low: int, high: int) -> int:
        return bisect.bisect_left(self.gaps, high) - bisect.bisect_right(self.gaps, low)


class Verifier:
    def __init__(self, cfg: BenchConfig):
        self.cfg = cfg
        self.ledgers: dict[int, dict[int, tuple[int, list[int]]]] = {}
        self.records: dict[str, list[tuple]] = defaultdict(list)
        self.acked: dict[tuple, SeqSet] = defaultdict(SeqSet)
        self.stats = new_stats()
        self.groups = [g or QUEUE_MODE_NAME for g in cfg.group_names]

    def add(self, payload: dict) -> None:
        for key, value in payload.get("stats", {}).items():
            self.stats[key] += value
        if "ledger" in payload:
            self.ledgers[payload["producer"]] = payload["ledger"]
        for record in payload.get("records", ()):
            group, name, _t, _consumer, _attempt, runs = record
            self.records[group].append(record)
            for p, first, last, outcome in runs:
                if outcome in (OK, RETRIED):
                    self.acked[(group, name, p)].add_range(first, last)

    def _accepted(self):
        """(producer, partition name, sequences sent, unconfirmed set) of every ledger entry."""
        for p, ledger in self.ledgers.items():
            for k, (n, unconfirmed) in ledger.items():
                yield p, partition_name(k), n, set(unconfirmed)

    def lost(self, group: str) -> tuple[int, int]:
        """(accepted, accepted but never acked) for one group."""
        accepted = lost = 0
        for p, name, n, unconfirmed in self._accepted():
            acked = self.acked.get((group, name, p))
            accepted += n - len(unconfirmed)
            if acked is None:
                lost += n - len(unconfirmed)
                continue
            lost += sum(1 for q in range(acked.prefix, n) if q not in unconfirmed and q not in acked.extra)
        return accepted, lost

    def settled(self) -> bool:
        return len(self.ledgers) == self.cfg.producer_procs and all(self.lost(g)[1] == 0 for g in self.groups)

    def results(self) -> dict:
        return {"groups": {group: self._check(group) for group in self.groups}, "stats": dict(self.stats),
                "producers_reported": len(self.ledgers)}

    def _check(self, group: str) -> dict:
        sent = {(p, name): (n, unconfirmed) for p, name, n, unconfirmed in self._accepted()}
        counters = dict.fromkeys(("delivered", "duplicates", "dup_lease", "dup_failed_ack", "dup_other",
                                  "reordered", "phantoms", "unconfirmed_delivered", "redelivered_elsewhere"), 0)
        examples: list[str] = []
        tracks: dict[tuple, _Track] = defaultdict(_Track)
        last_consumer: dict[tuple, str] = {}
        for record in sorted(self.records[group], key=lambda r: (r[1], r[2])):
            _group, name, _t, consumer, _attempt, runs = record
            started: set[int] = set()
            for p, first, last, outcome in runs:
                known = sent.get((p, name))
                track = tracks[(name, p)]
                for q in range(first, last + 1):
                    counters["delivered"] += 1
                    if known is None or not 0 <= q < known[0]:
                        counters["phantoms"] += 1
                        if len(examples) < 10:
                            examples.append(f"phantom {name} p={p} q={q}")
                        continue
                    if q in known[1]:
                        counters["unconfirmed_delivered"] += 1
                    at_start = p not in started
                    started.add(p)
                    if q > track.hi:
                        if q > track.hi + 1:
                            track.gaps.extend(range(track.hi + 1, q))
                        track.hi = q
                    else:
                        index = bisect.bisect_left(track.gaps, q)
                        if index < len(track.gaps) and track.gaps[index] == q:
                            del track.gaps[index]
                            counters["reordered"] += 1
                            if len(examples) < 10:
                                examples.append(f"late {name} p={p} q={q} after {track.hi}")
                        else:
                            counters["duplicates"] += 1
                            cause = track.unacked.get(q, OK)
                            counters[{OK: "dup_other", FAILED: "dup_failed_ack", RETRIED: "dup_failed_ack"}.get(
                                cause, "dup_lease")] += 1
                            if cause == OK and len(examples) < 10:
                                examples.append(f"duplicate of an acked message {name} p={p} q={q}")
                            contiguous = q > track.last and track.skipped_between(track.last, q) == q - track.last - 1
                            if not at_start and not contiguous:
                                counters["reordered"] += 1
                                if len(examples) < 10:
                                    examples.append(f"backwards {name} p={p} q={q} after {track.last}")
                            if at_start and last_consumer.get((name, p)) not in (None, consumer):
                                counters["redelivered_elsewhere"] += 1
                    if outcome == OK:
                        track.unacked.pop(q, None)
                    else:
                        track.unacked[q] = outcome
                    track.last = q
                    last_consumer[(name, p)] = consumer
        for (name, p), track in tracks.items():
            known = sent.get((p, name))
            if known is None:
                continue
            skipped = [q for q in track.gaps if q not in known[1]]
            counters["reordered"] += len(skipped)
            if skipped and len(examples) < 10:
                examples.append(f"skipped {name} p={p} q={skipped[:5]}")
        accepted, lost = self.lost(group)
        undelivered = 0
        for (p, name), (n, unconfirmed) in sent.items():
            track = tracks.get((name, p))
            hi = track.hi if track else -1
            gaps = set(track.gaps) if track else set()
            undelivered += sum(1 for q in range(n) if q not in unconfirmed and (q > hi or q in gaps))
        counters.update(accepted=accepted, lost=lost, undelivered=undelivered)
        counters["examples"] = examples
        return counters

    @staticmethod
    def failed(results: dict) -> bool:
        return any(g["lost"] or g["reordered"] or g["phantoms"] or g["dup_other"] for g in results["groups"].values())


def result_lines(results: dict) -> list[str]:
    lines = []
    stats = results["stats"]
    if stats:
        lines.append("  verify requests: " + " ".join(f"{k}={v}" for k, v in sorted(stats.items())))
    for group, g in results["groups"].items():
        lines.append(f"  verify group={group}: accepted={g['accepted']:,} delivered={g['delivered']:,} "
                     f"duplicates={g['duplicates']:,} (lease {g['dup_lease']}, failed ack {g['dup_failed_ack']}, "
                     f"other {g['dup_other']}) unconfirmed-delivered={g['unconfirmed_delivered']} "
                     f"redelivered-elsewhere={g['redelivered_elsewhere']} undelivered={g['undelivered']}")
        lines.extend(f"    {example}" for example in g["examples"])
    totals = {key: sum(g[key] for g in results["groups"].values())
              for key in ("lost", "duplicates", "reordered", "phantoms", "dup_other")}
    verdict = "FAIL" if Verifier.failed(results) else "OK"
    lines.append(f"[verify {verdict}] lost={totals['lost']} duplicates={totals['duplicates']} "
                 f"reordered={totals['reordered']} phantoms={totals['phantoms']} "
                 f"(unexplained duplicates {totals['dup_other']})")
    return lines

