"""The retention loop: keeps the database from growing.

Every ``interval`` seconds each broker process asks for the ``retention`` lease; the holder
runs a round. A round has two parts:

- **The due walks** delete what fell due since the last round. Segments are indexed in creation
  order (``rq_segments_due``), and for each retention period in use (the distinct
  retentionSeconds, maxWaitTimeSeconds and completedRetentionSeconds of the queues) a walk
  keeps a position in that order and reads on, in steps of ``DUE_WINDOW`` segments
  (``rq_retention_due_step``), until it reaches the segments younger than its period. Each
  segment that goes for its own queue's rules takes its partition's older segments with it; one
  that stays (not consumed yet, or its queue keeps longer) is passed. Their cost is the data
  that falls due, not the partitions that hold data (most of which hold only a young segment or
  two, which a visit to every partition would read for nothing). Unpaced: a walk only reads
  what is due, and a round's share is what the load pushed in an interval. The walks take at
  most half a round (``WALKS_SHARE_OF_ROUND``), so the sweep always gets its turn.
- **The sweep** deletes what the walks passed: segments whose readers caught up after their
  time, and segments committed after a walk had passed their creation time. It leaves to the
  walks a partition whose oldest segment fell due less than a walk period ago (with many
  partitions a pass would otherwise meet every partition fallen due since the last walk, which
  the next walk deletes anyway). ``parallelism`` workers at once, each over its own contiguous
  range of partition ids (ids are random UUIDs, so the ranges hold about the same number of
  partitions and never overlap: two workers never delete in the same partition), each walking
  the partitions of its range that hold segments in bounded steps (``rq_retention_step``: a
  window of such partitions, at most ``STEP_ROWS`` segments deleted, one short transaction). A
  worker that runs out of round time resumes where it stopped in the next round; one that
  finished its range starts the next sweep of it only ``WALK_INTERVALS`` intervals after it
  started the last one. A sweep that keeps up is paced: after its steps a worker rests so that
  the sweep, all workers together, takes at most ``WALK_SHARE`` of one core (unpaced, the
  workers walking many partitions that hold data take whole cores at once, and every push and
  pop waits behind them). A sweep that does not keep up is not paced: a step that deleted a
  full ``STEP_ROWS`` (backlog), or segments overdue by a walk period or more, is followed at
  once.

The walks run before the sweep, not beside it; what either deleted is counted from what its
DELETE removed, so nothing is counted twice even when a lease changes hands mid-step. Then the
deduplication keys whose window has passed go (``rq_dedup_purge_step``). Bounded steps keep
each transaction short, so pushes and pops never queue behind a long delete.

With ``idle_days`` > 0, each sweep worker also takes one step per round of the idle-partition
cleanup (``rq_idle_partitions_step``: ``IDLE_WINDOW`` partitions of its range, the empty ones
idle that long deleted). That walk has to look at every partition, empty or not, so it is
paced rather than run to the end: partitions go idle over days, and walking all of them at
full speed each round would keep a core busy.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid

from reginamq.maintenance import leader
from reginamq.store import Store

log = logging.getLogger("reginamq.retention")

STEP_ROWS = 1_000
WINDOW_PARTITIONS = 1_000
# Segments a due-walk step reads. A step looks up, deletes from and counts each partition of
# its window once, so where partitions are written all the time a larger window shares that
# among more of their segments; where each partition holds one segment, fewer and larger steps
# still cost less than many small ones.
DUE_WINDOW = 10_000
DEDUP_STEP_ROWS = 10_000
MAX_SECONDS_PER_ROUND = 4.0
# The due walks' part of a round at most: a new lease holder's walks read every segment the
# last one had passed, and that must not starve the sweep.
WALKS_SHARE_OF_ROUND = 0.5
WALK_INTERVALS = 12
WALK_SHARE = 0.25
IDLE_WINDOW = 1_000
STEP_COUNTERS = ("segments", "messages", "evicted")  # what the steps report
DUE_WORKER = -1  # the due walks' row in rq_retention_totals (sweep workers are 0..parallelism-1)
# Where a due walk starts: before every segment.
DUE_START = (datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC), uuid.UUID(int=0), -1)
COUNTERS = (*STEP_COUNTERS, "partitions")  # and the idle-partition cleanup


def id_ranges(parallelism: int) -> list[tuple[uuid.UUID, uuid.UUID | None]]:
    """Split the UUID space into ``parallelism`` contiguous ranges ``[start, end)`` (the last
    open-ended). PostgreSQL orders uuids as 128-bit big-endian numbers, like ``UUID.int``."""
    starts = [uuid.UUID(int=k * (1 << 128) // parallelism) for k in range(parallelism)]
    return [(start, starts[k + 1] if k + 1 < parallelism else None) for k, start in enumerate(starts)]


class RetentionLoop(leader.ElectedLoop):
    LEASE_NAME = "retention"

    def __init__(self, store: Store, interval: float, parallelism: int = 1, idle_days: float = 0.0):
        super().__init__(store, interval)
        self._ranges = id_ranges(parallelism)
        self._positions = [start for start, _ in self._ranges]
        self._idle_positions = [start for start, _ in self._ranges]
        self._walk_period = WALK_INTERVALS * interval
        self._walk_started = [-self._walk_period] * parallelism
        self._rest_per_busy = rest_per_busy(parallelism)
        self._idle_seconds = idle_days * 86_400
        self._due_positions: dict[int, tuple] = {}  # retention period (seconds) -> where its walk is

    async def round(self) -> dict[str, int]:
        """Run the due walks until they caught up (within their share of the round), then every
        sweep worker until its range is done, then the purges; all within the round's time."""
        started = time.monotonic()
        deadline = started + MAX_SECONDS_PER_ROUND
        due = await self._due_walks(started + WALKS_SHARE_OF_ROUND * MAX_SECONDS_PER_ROUND)
        # Every worker ends (at the deadline at the latest) before a failure of one is raised,
        # so no step of this round can overlap the next round's.
        per_worker = await asyncio.gather(*(self._walk(worker, deadline) for worker in range(len(self._ranges))),
                                          return_exceptions=True)
        for outcome in per_worker:
            if isinstance(outcome, BaseException):
                raise outcome
        totals = {key: due.get(key, 0) + sum(counts[key] for counts in per_worker) for key in COUNTERS}
        totals["dedup_keys"] = 0
        while time.monotonic() < deadline:
            deleted = await self._store.retention.purge_dedup(DEDUP_STEP_ROWS)
            totals["dedup_keys"] += deleted
            if deleted < DEDUP_STEP_ROWS:
                break
        await self._store.retention.purge_totals()
        if any(totals.values()):
            log.debug("retention round: %s", totals)
        return totals

    async def _due_walks(self, deadline: float) -> dict[str, int]:
        """Each retention period's walk from its position until it reaches segments younger
        than the period. A period no queue uses any more drops its position; a new one starts
        before every segment."""
        periods = await self._store.retention.periods()
        self._due_positions = {period: self._due_positions.get(period, DUE_START) for period in periods}
        counts = dict.fromkeys(STEP_COUNTERS, 0)
        for period in periods:
            await self._due_walk(period, deadline, counts)
        return counts

    async def _due_walk(self, period: int, deadline: float, counts: dict[str, int]) -> None:
        while time.monotonic() < deadline:
            row = await self._store.retention.due_step(period, *self._due_positions[period], DUE_WINDOW, DUE_WORKER)
            for key in STEP_COUNTERS:
                counts[key] += row[key]
            self._due_positions[period] = (row["next_at"], row["next_partition"], row["next_base"])
            if row["candidates"] < DUE_WINDOW:
                return

    async def _walk(self, worker: int, deadline: float) -> dict[str, int]:
        """One worker: a step of the idle cleanup, then steps over its range's data from where it
        stopped last, once round at most."""
        start, end = self._ranges[worker]
        counts = dict.fromkeys(COUNTERS, 0)
        if self._idle_seconds > 0:
            row = await self._store.retention.idle_step(self._idle_positions[worker], end, IDLE_WINDOW,
                                                        self._idle_seconds, worker)
            counts["partitions"] = row["partitions"]
            self._idle_positions[worker] = start if row["next_from"] is None else row["next_from"]
        if self._positions[worker] == start:
            if time.monotonic() - self._walk_started[worker] < self._walk_period:
                return counts  # this range was walked a moment ago
            self._walk_started[worker] = time.monotonic()
        while time.monotonic() < deadline:
            began = time.monotonic()
            row = await self._store.retention.sweep_step(self._positions[worker], end, WINDOW_PARTITIONS, STEP_ROWS,
                                                         worker, self._walk_period)
            for key in STEP_COUNTERS:
                counts[key] += row[key]
            if row["next_from"] is None:
                self._positions[worker] = start
                break
            self._positions[worker] = row["next_from"]
            now = time.monotonic()
            rest = self.rest_after(row, now - began)
            if rest > 0:
                await asyncio.sleep(min(rest, max(0.0, deadline - now)))
        return counts

    def rest_after(self, row, busy: float) -> float:
        """Seconds to rest after a step that took ``busy`` seconds: none after a full step
        (backlog) or one that deleted segments overdue by a walk period or more (the walk runs
        late: where each partition holds one segment, a late walk deletes less than a full step
        and would otherwise stay paced while the database grows)."""
        if row["segments"] >= STEP_ROWS or row["overdue"] >= self._walk_period:
            return 0.0
        return busy * self._rest_per_busy


def rest_per_busy(parallelism: int) -> float:
    """Seconds a worker rests per second its light step took, so that ``parallelism`` workers
    together keep to ``WALK_SHARE`` of one core."""
    return max(0.0, parallelism / WALK_SHARE - 1)
