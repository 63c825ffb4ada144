"""Pop: claim partitions for a consumer group, lease their next messages, render the answer.

The answer is a join of the fragments stored at push time and one per-segment suffix with the
per-delivery fields, so a pop never decodes or re-encodes a payload. A long poll parks in
:class:`~reginamq.engine.waiters.Waiters` between attempts and holds no connection meanwhile.

Each attempt is sized first: the client's batch and partitions, or autopilot's choice for what
it left unset (autopilot.py), or, for a group that conflates (gets only each partition's
newest message), one message a partition. A group's delivery policy is fixed in the database at
its first pop; the process remembers what rq_pop last reported (:class:`GroupPolicies`), so an
answer, empty ones included, can echo it without a query, as queen-mq requires.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

import orjson

from reginamq.common.times import iso_millis
from reginamq.engine.autopilot import Plan
from reginamq.engine.hot_partitions import HotPartitions
from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.waiters import settle
from reginamq.store import Store

log = logging.getLogger("reginamq.pop")

FIRST_RECHECK = 0.1
LAST_RECHECK = 1.0
SHORT_WAIT_MS = 100  # a wait this short could end before an announcement on its way arrives
TIMED_OUT = object()  # what a parked pop's future holds when its wait ran out (see _wait_for)
DEFAULT_BATCH = 200
DEFAULT_PARTITIONS = 1
MAX_CONFLATING_PARTITIONS = 64  # a conflating pop claims up to this many partitions, one message each
MAX_KNOWN_POLICIES = 100_000
# What a pop may ask for (engine/operations.py checks it; http/openapi.py describes it).
MAX_BATCH = 10_000
MAX_PARTITIONS_PER_POP = 1_000
MAX_TIMEOUT_MS = 3_600_000
DEFAULT_TIMEOUT_MS = 30_000  # how long a long poll that does not say waits
# Where a named group's cursors start at its first pop, by the names a client may use.
SUBSCRIPTION_MODES = {"all": "all", "new": "new", "new-only": "new"}


@dataclasses.dataclass(frozen=True)
class PopRequest:
    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    group: str
    batch: int | None  # None: the client left it to the broker (autopilot) or to its default
    partitions: int | None
    auto_ack: bool
    wait: bool
    timeout_ms: int
    lease_seconds: int
    subscription_mode: str
    subscription_from: datetime | None
    autopilot: bool = False  # the client asked the broker to size what it left unset
    conflation: bool | None = None  # last-value delivery asked for; None: the pop did not say


@dataclasses.dataclass
class Popped:
    """What a pop delivered (``rows``: segment slices, see the store's ``messages.pop``) and what
    its answer says besides: the group's delivery policy on what it read, whether the pop asked
    for the other one, and autopilot's sizing when the client asked for it."""

    rows: list
    lease_id: str
    conflation: bool = False
    conflict: bool = False
    plan: Plan | None = None


class GroupPolicies:
    """Per process: whether a consumer group conflates on what a pop reads (a queue, or a
    namespace/task selection), as rq_pop last reported it. The policy is fixed when the group
    first registers on a queue and changes only when its subscription there is deleted, which
    notifies the queue (009_groups.sql): then that queue's entries and every selection's go."""

    def __init__(self) -> None:
        self._known: dict[tuple, bool] = {}

    def get(self, key: tuple) -> bool | None:
        return self._known.get(key)

    def record(self, key: tuple, conflating: bool) -> None:
        if len(self._known) >= MAX_KNOWN_POLICIES:  # bounded: what is dropped is asked again
            self._known.clear()
        self._known[key] = conflating

    def forget(self, queue: str | None = None) -> None:
        """A queue's subscriptions changed (``None``: anything may have)."""
        if queue is None:
            self._known.clear()
            return
        for key in [k for k in self._known if k[0] == queue or k[0] is None]:
            del self._known[key]


SWEEP_PAUSE = 1.0
MAX_SWEEP_PAUSE = 16.0
NO_POSITION = (None, None)  # a sweep position is (queue id, partition name): see rq_pop_sweep
NEVER_SWEPT = (NO_POSITION, 0.0, 0.0, None)  # a reader's (position, next sweep, pause, paused since)


class SweepPositions(dict):
    """Per process: where each (queue or namespace/task, group)'s backlog sweep stopped, and
    when it may sweep next. A sweep that found work may go on at once (a backlog is being
    read; what the pop could not take comes back as hints); one that found nothing pauses the
    next, for a second and then twice as long each time up to :data:`MAX_SWEEP_PAUSE`, so
    that idle pollers and consumers that keep up do not walk a large queue over and over.
    The pause ends early when the reader's hints began again (``since`` moved: see
    hot_partitions.py), because what the sweep must cover changed then. A pop that matched no
    queue at all (a consumer started before its queue exists) pauses the same way, and sweeps
    again as soon as it has hints: a queue has come to exist that it may read.
    Losing this state (a restart) only restarts a sweep from the beginning."""

    @staticmethod
    def key(request: PopRequest) -> tuple:
        return request.queue, request.namespace, request.task, request.group

    def __init__(self) -> None:
        super().__init__()
        self._sweeping: set[tuple] = set()
        self._nothing_there: set[tuple] = set()  # readers whose last pop matched no queue

    def position(self, key: tuple, since: datetime | None, hinted: bool = False) -> tuple[object, bool]:
        """Where the reader's sweep stands and whether this pop may sweep. A pop that may sweep
        holds the reader's sweep until it calls :meth:`release`: concurrent pops of the reader
        would otherwise all sweep the same windows from the same position, walking a large
        queue several times over for one reader's work."""
        position, next_sweep, _pause, paused_since = self.get(key, NEVER_SWEPT)
        may_sweep = key not in self._sweeping and (time.monotonic() >= next_sweep or since != paused_since
                                                   or (hinted and key in self._nothing_there))
        if may_sweep:
            self._sweeping.add(key)
        return position, may_sweep

    def due(self, key: tuple) -> bool:
        """Whether a pop of the reader may sweep now, as far as the pause tells (the pause also
        ends when the reader's hints begin again: :meth:`position` knows that)."""
        return key not in self._sweeping and time.monotonic() >= self.get(key, NEVER_SWEPT)[1]

    def release(self, key: tuple) -> None:
        """The pop that was allowed to sweep has its answer (or failed): another may sweep."""
        self._sweeping.discard(key)

    def nothing_there(self, key: tuple) -> bool:
        """The reader's last pop matched no queue."""
        return key in self._nothing_there

    def record(self, key: tuple, position, swept: bool | None, since: datetime | None,
               nothing_there: bool = False) -> None:
        """``swept``: None if the pop did not sweep, else whether its sweep found work;
        ``nothing_there``: the pop matched no queue."""
        if nothing_there:
            self._nothing_there.add(key)
        else:
            self._nothing_there.discard(key)
        _, next_sweep, pause, paused_since = self.get(key, NEVER_SWEPT)
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
        """Only a long poll of one queue with a batch above 1 (or left to the broker) can have a
        fill wait; a conflating group's pops take one message a partition and have none."""
        return (request.wait and (request.batch is None or request.batch > 1) and request.queue is not None
                and not request.conflation)

    async def seconds(self, store: Store, request: PopRequest) -> float:
        """The fill wait for this pop (the caller has heard the configure notifications
        committed before it, so an option set a moment ago on another process applies)."""
        if not self.may_apply(request):
            return 0.0
        if time.monotonic() - self._read_at >= self.REFRESH_SECONDS:
            self._millis = await store.queue_settings.fill_waits()
            self._read_at = time.monotonic()
        return self._millis.get(request.queue, 0) / 1000


class HangUp:
    """The client hanging up, watched from a pop's first wait on: most pops never wait, and
    a watch costs a future and a callback in the HTTP server."""

    def __init__(self, wait_disconnect: Callable[[], Awaitable[object]] | None) -> None:
        self._wait_disconnect = wait_disconnect
        self._gone: asyncio.Future | None = None

    def watch(self) -> asyncio.Future | None:
        """The future that completes when the client hangs up (None: nobody can tell)."""
        if self._gone is None and self._wait_disconnect is not None:
            self._gone = asyncio.ensure_future(self._wait_disconnect())
        return self._gone

    @property
    def heard(self) -> bool:
        return self._gone is not None and self._gone.done()

    def close(self) -> None:
        if self._gone is not None:
            self._gone.cancel()


async def pop(broker, request: PopRequest,
              wait_disconnect: Callable[[], Awaitable[object]] | None = None) -> Popped:
    """Deliver messages or, once the wait is over, nothing (``rows`` empty).

    ``broker`` (engine/broker.py) lends its per-process state: ``waiters``, ``sweeps``, ``hot``,
    ``fill_waits``, ``policies``, ``autopilot``, ``meter`` and ``store``.
    ``wait_disconnect`` returns when the client hangs up: a long poll stops there, so nothing
    is leased (or, with auto-ack, consumed) for a client that is no longer listening.
    With the queue's minPopWaitTime, a long poll that finds fewer messages than its batch
    waits (up to that long, counted from the first message it saw) for the batch to fill,
    so that one pop and one commit carry more messages.
    """
    key = SweepPositions.key(request)
    hang_up = HangUp(wait_disconnect if request.wait else None)
    if request.autopilot:
        broker.autopilot.begin(key)
    try:
        return await _pop(broker, request, key, hang_up)
    finally:
        hang_up.close()
        if request.autopilot:
            broker.autopilot.end(key)


async def _pop(broker, request: PopRequest, key: tuple, hang_up: HangUp) -> Popped:
    waiters, store, sweeps = broker.waiters, broker.store, broker.sweeps
    deadline = time.monotonic() + request.timeout_ms / 1000
    recheck = FIRST_RECHECK
    fill_wait = None
    fill_until = None
    first_attempt = True
    heard_all = True
    # An answer now (or soon) must include every push its client saw answered; a longer wait
    # is woken by an announcement still on its way, and hears only the catalog (a configure's
    # notice, for the fill wait) when it hears at all.
    answers_soon = must_hear = not request.wait or request.timeout_ms < SHORT_WAIT_MS
    sized_for = sized = plan = None
    while True:
        conflating = _conflating(broker.policies, key, request)
        if request.autopilot or sized is None or conflating != sized_for:  # autopilot re-plans each attempt
            sized, plan = _size(broker, request, key, conflating)
            sized_for = conflating
        parked = (waiters.park(request.queue, request.group, sized.partitions, bound=request.partition is not None)
                  if request.wait else None)
        try:
            if fill_wait is None and (must_hear or _work_in_sight(broker, request, key, conflating)):
                # The client may have just been answered a push (or a configure) whose
                # announcement this process has not heard yet: hear what was committed so far
                # (everything for an answer now, the catalog's for a long poll), then take the
                # hints and the queue's fill wait (or, not sure of that, look the recent writes
                # up too). A long poll with nothing in sight parks without hearing: an
                # announcement still on its way wakes it, and it hears (for the fill wait) once
                # it has something to ask.
                hinted = _reads_hints(request) and not broker.hot.scan_due(_source(request), request.group)
                if hinted or FillWaits.may_apply(sized):
                    heard_all = await waiters.sync(store, catalog_only=not answers_soon)
                fill_wait = await broker.fill_waits.seconds(store, sized)
            if fill_wait and (fill_until is None or time.monotonic() < fill_until):
                ready = await store.messages.pop_ready(sized.queue, sized.partition, sized.group, sized.partitions,
                                                       sized.batch)
                if 0 < ready < sized.batch:
                    fill_until = fill_until or time.monotonic() + fill_wait
                    until = min(fill_until, deadline) - time.monotonic()
                    if until > 0 and not waiters.closing:
                        # a missed wake-up costs at most a recheck interval, as in the long poll
                        await _wait_for(parked, hang_up.watch(), min(until, LAST_RECHECK))
                        if waiters.closing or hang_up.heard:
                            return _answer([], "", conflating, request, plan)
                        continue
            if request.queue is None and broker.hot.directory_due():  # only a selection needs it
                await broker.hot.read_directory(store)
            hints, since, scan = _hints(broker.hot, sized)
            scan = scan or (first_attempt and not heard_all)
            sweep_from, may_sweep = sweeps.position(key, since, bool(hints))
            report = _reports(sweeps, key, request, conflating, bool(hints) or scan or may_sweep)
            # Nothing announced (having heard every announcement), no look-up due, the sweep
            # resting and the group's policy known: there is nothing to ask the database.
            # Expired leases announce themselves too (lease_watcher.py), so an idle long poll costs
            # no query at all.
            asking = bool(hints) or scan or may_sweep or report
            if asking and fill_wait is None:  # more to ask than _work_in_sight foresaw: hear first
                if hints:
                    broker.hot.give_back(_source(request), request.group, hints)
                if may_sweep:
                    sweeps.release(key)
                must_hear = True
                continue
            first_attempt = False
            lease_id = str(uuid.uuid4()) if asking else ""
            arguments = (*_arguments(sized, lease_id), *sweep_from, may_sweep, hints, since, scan,
                         request.conflation, report)
            try:
                rows = (await _to_its_end(store.messages.pop(*arguments), store,
                                          None if request.auto_ack else lease_id) if asking else [])
            except BaseException:
                if hints:
                    broker.hot.give_back(_source(request), request.group, hints)
                raise
            finally:
                if may_sweep:
                    sweeps.release(key)
            handed_back = False  # hints the pop did not get to: more is waiting
            if rows:
                last = rows[-1]
                trailing = last[1] is None  # the last row without a message: see rq_pop
                sweeps.record(key, (last[6], last[7]), last[8], since, nothing_there=trailing and last[11] is None)
                if trailing:
                    trailer = rows.pop()
                    broker.hot.give_back(_source(request), request.group, trailer[9])
                    handed_back = bool(trailer[9])
                    if report and trailer[11] is not None:
                        broker.policies.record(key, trailer[11])
                        conflating = trailer[11]
            delivered = sum(len(row[5]) for row in rows)
            if asking:
                broker.meter.queried(delivered > 0)
            oldest = min(row[3] for row in rows) if rows else None
            if plan is not None:
                broker.autopilot.observe(
                    key, len({row[1] for row in rows}), broker.hot.waiting(_source(request), request.group),
                    delivered, None if oldest is None else time.time() - oldest.timestamp(),
                    None if request.auto_ack else lease_id)
            if rows:
                broker.meter.popped(rows[0][0], delivered, oldest)
                if handed_back or _took_all_it_could(rows, delivered, sized):
                    waiters.wake(rows[0][0], request.group)  # there may be more work: the group's next poller looks
                return _answer(rows, "" if request.auto_ack else lease_id, conflating, request, plan)
            remaining = deadline - time.monotonic()
            if parked is None or remaining <= 0 or waiters.closing:
                return _answer([], "", conflating, request, plan)
            if not await _wait_for(parked, hang_up.watch(), min(recheck, remaining),
                                   functools.partial(_nothing_to_ask, broker, request, key), deadline):
                recheck = min(recheck * 2, LAST_RECHECK)
            if waiters.closing or hang_up.heard:
                return _answer([], "", conflating, request, plan)
        finally:
            if parked is not None:
                waiters.unpark(request.queue, request.group, parked)


async def _to_its_end(statement: Awaitable[list], store: Store, lease_id: str | None) -> list:
    """The pop statement's rows. A caller cancelled while the statement runs does not cut it off:
    cut off, it may still have committed its leases, which nobody would see until they expired.
    It runs to its end, and what it leased under ``lease_id`` is handed back at once (None: it
    leased nothing, as with autoAck, whose messages are consumed)."""
    running = asyncio.ensure_future(statement)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        running.add_done_callback(functools.partial(_hand_back, store, lease_id))
        raise


_handing_back: set[asyncio.Task] = set()  # hand-backs under way, kept from the garbage collector


def _hand_back(store: Store, lease_id: str | None, statement: asyncio.Future) -> None:
    if statement.cancelled() or statement.exception() is not None:
        return  # rolled back: nothing was leased
    if lease_id is not None and any(row[1] is not None for row in statement.result()):
        task = asyncio.get_running_loop().create_task(_expire(store, lease_id))
        _handing_back.add(task)
        task.add_done_callback(_handing_back.discard)


async def _expire(store: Store, lease_id: str) -> None:
    try:
        await store.messages.expire_lease(lease_id)
    except Exception as error:  # the lease then ends when it expires
        log.warning("a cancelled pop's lease %s was not handed back: %s", lease_id, error)


def _work_in_sight(broker, request: PopRequest, key: tuple, conflating: bool | None) -> bool:
    """Whether this attempt of a long poll will ask the database: a partition pop always does;
    a wildcard pop when its reader holds hints or a look-up is due, its sweep may run, or it
    must ask for the group's policy (see the ``asking`` of :func:`_pop`)."""
    if not _reads_hints(request) or _reports(broker.sweeps, key, request, conflating, news=False):
        return True
    source = _source(request)
    return (broker.hot.waiting(source, request.group) > 0 or broker.hot.scan_due(source, request.group)
            or broker.sweeps.due(key))


def _nothing_to_ask(broker, request: PopRequest, key: tuple) -> bool:
    """Whether a parked long poll's re-check would ask the database nothing: no work in sight
    and, for a namespace/task pop, no read of the queue directory due (see :func:`_pop`)."""
    return not (_work_in_sight(broker, request, key, _conflating(broker.policies, key, request))
                or (request.queue is None and broker.hot.directory_due()))


def _reports(sweeps: SweepPositions, key: tuple, request: PopRequest, conflating: bool | None,
             news: bool) -> bool:
    """Whether the pop asks rq_pop for the group's policy: when the process does not know it
    (queue mode has none) -- for a pop that matched no queue when last asked, only when it asks
    the database anyway (``news``: hints, a look-up or a sweep due), which is how it learns
    that the queue has come to exist."""
    if conflating is not None or request.group == QUEUE_MODE:
        return False
    return news or not sweeps.nothing_there(key)


def _conflating(policies: GroupPolicies, key: tuple, request: PopRequest) -> bool | None:
    """The group's policy on what the pop reads as far as this process knows (queue mode never
    conflates); None when it must ask rq_pop."""
    if request.group == QUEUE_MODE:
        return False
    return policies.get(key)


def _size(broker, request: PopRequest, key: tuple, conflating: bool | None) -> tuple[PopRequest, Plan | None]:
    """The pop as rq_pop runs it: batch and partitions settled, and autopilot's plan if the
    client asked for one. A conflating pop hands out one message a partition, so its batch
    (unless its partitions were given) decides how many partitions it may claim, up to
    MAX_CONFLATING_PARTITIONS; autopilot does not size it. Until the policy is known the
    pop's own request stands in for it."""
    conflating = _effective(conflating, request)
    batch, partitions = request.batch, request.partitions
    plan = None
    if conflating:
        batch = batch or DEFAULT_BATCH
        partitions = min(max(partitions or batch, 1), MAX_CONFLATING_PARTITIONS)
    elif request.autopilot and (batch is None or partitions is None):
        plan = broker.autopilot.plan(key, batch, 1 if request.partition is not None else partitions,
                                     broker.hot.waiting(_source(request), request.group))
        batch, partitions = plan.batch, plan.partitions
    return dataclasses.replace(request, batch=batch or DEFAULT_BATCH, partitions=partitions or DEFAULT_PARTITIONS,
                               conflation=conflating), plan


def _effective(conflating: bool | None, request: PopRequest) -> bool:
    """The policy a pop runs under: the group's as known, else what the pop asked for."""
    return bool(request.conflation) if conflating is None else conflating


def _answer(rows: list, lease_id: str, conflating: bool | None, request: PopRequest, plan: Plan | None) -> Popped:
    on = _effective(conflating, request)
    return Popped(rows, lease_id, on, request.conflation is not None and request.conflation != on, plan)


async def _wait_for(parked: asyncio.Future, client_gone: asyncio.Future | None, seconds: float,
                    nothing_to_ask: Callable[[], bool] | None = None, deadline: float = 0.0) -> bool:
    """Wait for a wake-up (or the client hanging up) at most ``seconds``; True if one came.
    ``parked`` is this pop's own future (waiters.py), so the time-out and the hang-up settle it
    directly: one timer and no helper future per wait, for a wait that mostly times out.

    With ``nothing_to_ask``, the time-out is the long poll's re-check: while it answers True
    (nothing announced, no look-up or sweep due) and ``deadline`` is ahead, the timer sets itself
    again on the back-off instead of waking the pop, which would only park again. An idle long
    poll therefore runs no code of its own until it is woken, finds work in sight, or ends."""
    if parked.done():
        return True
    loop = asyncio.get_running_loop()
    interval = seconds

    def time_out() -> None:
        nonlocal timer, interval
        remaining = deadline - time.monotonic()
        try:
            rest = nothing_to_ask is not None and remaining > 0 and nothing_to_ask()
        except Exception:  # a re-check that cannot tell wakes the pop: it must never stay parked
            log.exception("a long poll's re-check failed")
            rest = False
        if rest:
            interval = min(interval * 2, LAST_RECHECK)
            timer = loop.call_later(min(interval, remaining), time_out)
        else:
            settle(parked, TIMED_OUT)

    timer = loop.call_later(seconds, time_out)
    on_hang_up = functools.partial(_hung_up, parked)
    if client_gone is not None:
        client_gone.add_done_callback(on_hang_up)
    try:
        return await parked is not TIMED_OUT
    finally:
        timer.cancel()
        if client_gone is not None:
            client_gone.remove_done_callback(on_hang_up)


def _hung_up(parked: asyncio.Future, _client_gone: asyncio.Future) -> None:
    settle(parked, False)


def _reads_hints(request: PopRequest) -> bool:
    """A wildcard pop (of a queue, or of a namespace and/or task) reads hints; a pop of one
    named partition needs none."""
    return request.partition is None


def _source(request: PopRequest):
    """Whose hints a pop reads: its queue's, or its selection's (see hot_partitions.py)."""
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


def _head(popped: Popped, group: str, claimed: int, queue: str, partition: str, partition_id: str) -> bytes:
    """The answer's own keys before its messages, as a JSON object without its closing brace."""
    head = {"success": True, "queue": queue, "partition": partition, "partitionId": partition_id,
            "leaseId": popped.lease_id, "consumerGroup": group, "partitionsClaimed": claimed}
    head.update(extras(popped))
    return orjson.dumps(head)[:-1]


def extras(popped: Popped) -> dict:
    """What an answer carries beside its messages: the conflation echo (queen-mq checks it) and
    autopilot's choice."""
    extra: dict = {}
    if popped.conflation:
        extra["conflation"] = True
    if popped.conflict:
        extra["conflationConflict"] = True
    if popped.plan is not None:
        extra["autopilot"] = popped.plan.echo()
    return extra


def answers_empty(popped: Popped, request: PopRequest) -> bool:
    """Whether an empty pop still answers with a body (200) rather than 204: when it must echo
    the group's conflation (queen-mq checks the echo on every pop that asked for conflation),
    or when it carries autopilot's advice to a consumer that polls without waiting."""
    return popped.conflation or popped.conflict or (popped.plan is not None and not request.wait)


def render_empty(popped: Popped, request: PopRequest) -> bytes:
    return _head(popped, request.group, 0, request.queue or "", "", "") + b',"messages":[]}'


def render(popped: Popped, group: str, reveal) -> bytes:
    """The pop's JSON answer; ``reveal`` opens sealed fragments (see encryption.py)."""
    rows = popped.rows
    first = rows[0]
    group_json = orjson.dumps(group)
    lease_json = orjson.dumps(popped.lease_id)
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
    head = _head(popped, group, len(claimed), first[0], first[2], first[1])
    return head + b',"messages":[' + b",".join(messages) + b"]}"
