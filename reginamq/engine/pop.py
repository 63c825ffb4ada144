"""Pop: claim partitions for a consumer group, lease their next messages, render the answer.

The answer is a join of the fragments stored at push time and one per-segment suffix with the
per-delivery fields, so a pop never decodes or re-encodes a payload. A long poll parks in
:class:`~reginamq.engine.waiters.Waiters` between attempts and holds no connection meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from datetime import datetime

import orjson

from reginamq.engine.browse import iso_millis
from reginamq.engine.hotlist import HotPartitions

POP_SQL = (
    "SELECT queue_name, partition_id::text, partition_name, created_at, attempt, payloads, sweep_queue, sweep_name, "
    "swept, hints_left::text[] FROM rq_pop($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, "
    "$17, $18)"
)
READY_SQL = "SELECT rq_pop_ready($1, $2, $3, $4, $5)"
FILL_WAITS_SQL = "SELECT name, min_pop_wait_ms FROM rq_queues WHERE min_pop_wait_ms > 0"
FIRST_RECHECK = 0.1
LAST_RECHECK = 1.0


@dataclasses.dataclass(frozen=True)
class PopRequest:
    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    group: str
    batch: int
    partitions: int
    auto_ack: bool
    wait: bool
    timeout_ms: int
    lease_seconds: int
    subscription_mode: str
    subscription_from: datetime | None


SWEEP_PAUSE = 1.0
MAX_SWEEP_PAUSE = 16.0
NO_POSITION = (None, None)  # a sweep position is (queue id, partition name): see rq_pop_sweep


class SweepPositions(dict):
    """Per process: where each (queue or namespace/task, group)'s backlog sweep stopped, and
    when it may sweep next. A sweep that found work may go on at once (a backlog is being
    read; what the pop could not take comes back as hints); one that found nothing pauses the
    next, for a second and then twice as long each time up to :data:`MAX_SWEEP_PAUSE`, so
    that idle pollers and consumers that keep up do not walk a large queue over and over.
    The pause ends early when the reader's hints began again (``since`` moved: see
    hotlist.py), because what the sweep must cover changed then.
    Losing this state (a restart) only restarts a sweep from the beginning."""

    @staticmethod
    def key(request: PopRequest) -> tuple:
        return request.queue, request.namespace, request.task, request.group

    def __init__(self) -> None:
        super().__init__()
        self._sweeping: set[tuple] = set()

    def position(self, key: tuple, since: datetime | None) -> tuple[object, bool]:
        """Where the reader's sweep stands and whether this pop may sweep. A pop that may sweep
        holds the reader's sweep until it calls :meth:`release`: concurrent pops of the reader
        would otherwise all sweep the same windows from the same position, and at a million
        partitions those duplicate sweeps cost a tenth of a core."""
        position, next_sweep, _pause, paused_since = self.get(key, (NO_POSITION, 0.0, 0.0, None))
        may_sweep = key not in self._sweeping and (time.monotonic() >= next_sweep or since != paused_since)
        if may_sweep:
            self._sweeping.add(key)
        return position, may_sweep

    def release(self, key: tuple) -> None:
        """The pop that was allowed to sweep has its answer (or failed): another may sweep."""
        self._sweeping.discard(key)

    def record(self, key: tuple, position, swept: bool | None, since: datetime | None) -> None:
        """``swept``: None if the pop did not sweep, else whether its sweep found work."""
        _, next_sweep, pause, paused_since = self.get(key, (NO_POSITION, 0.0, 0.0, None))
        if swept is True:
            self[key] = (position, 0.0, 0.0, since)
        elif swept is False:
            pause = min(max(2 * pause, SWEEP_PAUSE), MAX_SWEEP_PAUSE)
            self[key] = (position, time.monotonic() + pause, pause, since)
        else:
            self[key] = (position, next_sweep, pause, paused_since)


class FillWaits:
    """Per process: the queues whose minPopWaitTime is set, re-read every few seconds, so a
    pop of any other queue pays nothing for the option (not even a lookup query)."""

    REFRESH_SECONDS = 2.0

    def __init__(self) -> None:
        self._millis: dict[str, int] = {}
        self._read_at = -self.REFRESH_SECONDS

    def forget(self) -> None:
        self._read_at = -self.REFRESH_SECONDS

    @staticmethod
    def may_apply(request: PopRequest) -> bool:
        """Only a long poll of one queue with a batch above 1 can have a fill wait."""
        return request.wait and request.batch > 1 and request.queue is not None

    async def seconds(self, run, request: PopRequest) -> float:
        """The fill wait for this pop (the caller has heard the configure notifications
        committed before it, so an option set a moment ago on another process applies)."""
        if not self.may_apply(request):
            return 0.0
        if time.monotonic() - self._read_at >= self.REFRESH_SECONDS:
            rows = await run(lambda conn: conn.fetch(FILL_WAITS_SQL))
            self._millis = {row[0]: row[1] for row in rows}
            self._read_at = time.monotonic()
        return self._millis.get(request.queue, 0) / 1000


async def pop(broker, request: PopRequest, client_gone: asyncio.Future | None = None) -> bytes | None:
    """Deliver messages or, once the wait is over, ``None`` (an empty pop).

    ``broker`` (runtime.Broker) lends its per-process state: ``waiters``, ``sweeps``, ``hot``,
    ``fill_waits``, ``sealer`` and ``run(call)``, which executes a database call with the
    broker's retry and error mapping.
    ``client_gone`` completes when the client hangs up: a long poll stops there, so nothing
    is leased (or, with auto-ack, consumed) for a client that is no longer listening.
    With the queue's minPopWaitTime, a long poll that finds fewer messages than its batch
    waits (up to that long, counted from the first message it saw) for the batch to fill,
    so that one pop and one commit carry more messages.
    """
    waiters, run, sweeps = broker.waiters, broker.run, broker.sweeps
    deadline = time.monotonic() + request.timeout_ms / 1000
    recheck = FIRST_RECHECK
    fill_wait = None
    fill_until = None
    first_attempt = True
    heard_all = True
    while True:
        parked = waiters.park(request.queue, request.group) if request.wait else None
        try:
            if fill_wait is None:
                # The client may have just been answered a push (or a configure) whose
                # announcement this process has not heard yet: hear everything committed so
                # far, then take the hints and the queue's fill wait (or, not sure of that,
                # look the recent writes up too).
                hinted = _reads_hints(request) and not broker.hot.scan_due(_source(request), request.group)
                if hinted or FillWaits.may_apply(request):
                    heard_all = await waiters.sync(run)
                fill_wait = await broker.fill_waits.seconds(run, request)
            if fill_wait and (fill_until is None or time.monotonic() < fill_until):
                ready = await run(lambda conn: conn.fetchval(
                    READY_SQL, request.queue, request.partition, request.group, request.partitions, request.batch))
                if 0 < ready < request.batch:
                    fill_until = fill_until or time.monotonic() + fill_wait
                    until = min(fill_until, deadline) - time.monotonic()
                    if until > 0 and not waiters.closing:
                        # a missed wake-up costs at most a recheck interval, as in the long poll
                        await _wait_for(parked, client_gone, min(until, LAST_RECHECK))
                        if waiters.closing or (client_gone is not None and client_gone.done()):
                            return None
                        continue
            lease_id = str(uuid.uuid4())
            key = SweepPositions.key(request)
            if request.queue is None and broker.hot.directory_due():  # only a selection needs it
                await broker.hot.read_directory(run)
            hints, since, scan = _hints(broker.hot, request)
            scan = scan or (first_attempt and not heard_all)
            sweep_from, may_sweep = sweeps.position(key, since)
            # Nothing announced (having heard every announcement), no look-up due and the
            # sweep resting: there is nothing to ask the database. Expired leases announce
            # themselves too (expiries.py), so an idle long poll costs no query at all.
            asking = bool(hints) or scan or may_sweep
            first_attempt = False
            try:
                rows = [] if not asking else await run(
                    lambda conn, lease_id=lease_id, sweep_from=sweep_from, may_sweep=may_sweep,
                    hints=hints, since=since, scan=scan: conn.fetch(
                        POP_SQL, *_arguments(request, lease_id), *sweep_from, may_sweep, hints, since, scan))
            except BaseException:
                if hints:
                    broker.hot.give_back(_source(request), request.group, hints)
                raise
            finally:
                if may_sweep:
                    sweeps.release(key)
            if rows:
                sweeps.record(key, (rows[-1][6], rows[-1][7]), rows[-1][8], since)
                if rows[-1][1] is None:  # the last row without a message: see rq_pop
                    broker.hot.give_back(_source(request), request.group, rows.pop()[9])
            found = bool(rows)
            if found:
                delivered = sum(len(row[5]) for row in rows)
                broker.meter.popped(rows[0][0], delivered, min(row[3] for row in rows))
                if _took_all_it_could(rows, delivered, request):
                    waiters.wake(rows[0][0], request.group)  # there may be more work: the group's next poller looks
                return render(rows, request.group, "" if request.auto_ack else lease_id, broker.sealer.reveal)
            remaining = deadline - time.monotonic()
            if parked is None or remaining <= 0 or waiters.closing:
                return None
            if not await _wait_for(parked, client_gone, min(recheck, remaining)):
                recheck = min(recheck * 2, LAST_RECHECK)
            if waiters.closing or (client_gone is not None and client_gone.done()):
                return None
        finally:
            if parked is not None:
                waiters.unpark(request.queue, request.group, parked)


async def _wait_for(parked: asyncio.Future, client_gone: asyncio.Future | None, seconds: float) -> bool:
    """Wait for a wake-up (or the client hanging up) at most ``seconds``; True if one came."""
    watched = {parked} if client_gone is None else {parked, client_gone}
    done, _ = await asyncio.wait(watched, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    return bool(done)


def _reads_hints(request: PopRequest) -> bool:
    """A wildcard pop (of a queue, or of a namespace and/or task) reads hints; a pop of one
    named partition needs none."""
    return request.partition is None


def _source(request: PopRequest):
    """Whose hints a pop reads: its queue's, or its selection's (see hotlist.py)."""
    return request.queue if request.queue is not None else (request.namespace, request.task)


def _hints(hot: HotPartitions, request: PopRequest) -> tuple[list[str], datetime | None, bool]:
    if not _reads_hints(request):
        return [], None, True
    return hot.take(_source(request), request.group, request.partitions)


def _took_all_it_could(rows, delivered: int, request: PopRequest) -> bool:
    """Whether the pop stopped at its own limits (so more may be waiting) rather than
    because it ran out of work."""
    return len({row[1] for row in rows}) >= request.partitions or delivered >= request.batch


def _arguments(request: PopRequest, lease_id: str) -> tuple:
    return (request.queue, request.partition, request.namespace, request.task, request.group,
            request.batch, request.partitions, request.auto_ack, request.lease_seconds, lease_id,
            request.subscription_mode, request.subscription_from)


def render(rows, group: str, lease_id: str, reveal) -> bytes:
    """The pop's answer; ``reveal`` opens sealed fragments (see sealing.py)."""
    first = rows[0]
    group_json = orjson.dumps(group)
    lease_json = orjson.dumps(lease_id)
    messages: list[bytes] = []
    claimed: set[str] = set()
    for row in rows:
        partition_id = row[1]
        claimed.add(partition_id)
        suffix = (b',"createdAt":"' + iso_millis(row[3]) + b'","partitionId":"' + partition_id.encode()
                  + b'","partition":' + orjson.dumps(row[2]) + b',"leaseId":' + lease_json
                  + b',"consumerGroup":' + group_json + b',"deliveryAttempt":' + str(row[4]).encode()
                  + b"}")
        messages.extend(b"{" + reveal(fragment) + suffix for fragment in row[5])
    head = orjson.dumps({
        "success": True, "queue": first[0], "partition": first[2], "partitionId": first[1],
        "leaseId": lease_id, "consumerGroup": group, "partitionsClaimed": len(claimed),
    })
    return head[:-1] + b',"messages":[' + b",".join(messages) + b"]}"
