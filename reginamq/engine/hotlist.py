"""Partitions with fresh data, per reader, so that a wildcard pop looks where the work is.

Without it a wildcard pop finds work by reading indexes whose cost grows with what they must
step over: the most recently written partitions (most of them already consumed) and a sweep of
the whole queue. At a million partitions those lookups were most of PostgreSQL's work (the
million-partition run in docs/benchmarks.md). Pushes announce the partitions they wrote in
their ``rq_push`` notification (see waiters.py), every broker process hears it, and here each
reader, a (queue, consumer group) that popped from this process recently, gets the partitions in
arrival order. A pop hands the oldest few to rq_pop, which checks them first.

These are hints, never the truth: a hint may be stale (another process's consumer already took
the data) and rq_pop drops it. What the hints cannot have announced -- data written before a
reader's hints began (a reader is created by its first pop, forgotten after a minute without
one, and begins again when the listener reconnects, its list overflows or a notification
names its queue but no partitions) -- is left to the
backlog sweep, which therefore skips what was written since (``since``, set a margin for
clocks later, so that the sweep overlaps the hints rather than leaving a gap). rq_pop also
looks up the recently written partitions: every second for the first five seconds of a
reader's hints, then every 16 s at most and only when it has no hints (a pop's first attempt
otherwise makes sure the hints hold every push committed before it: see pop.py). Memory
follows the active partitions:
a reader that stops popping is forgotten, and each list is capped.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

MAX_HINTS_PER_READER = 65_536
IDLE_READER_SECONDS = 60.0
SCAN_INTERVAL = 1.0
CATCH_UP_SECONDS = 5.0
SAFETY_SCAN_INTERVAL = 16.0
MAX_HINTS_PER_POP = 1_000
CLOCK_MARGIN_SECONDS = 5.0  # broker and database clocks may differ by less than this


class _Reader:
    __slots__ = ("began", "hints", "last_pop", "last_scan", "since")

    def __init__(self) -> None:
        self.hints: dict[str, None] = {}  # insertion-ordered set: the oldest hint first
        self.last_pop = time.monotonic()
        self.begin()

    def begin(self) -> None:
        """From now on the hints are complete; what was written before is the sweep's."""
        self.since = time.time() + CLOCK_MARGIN_SECONDS  # later, not earlier: the sweep overlaps
        self.began = time.monotonic()
        self.last_scan = 0.0

    def scan_due(self, now: float) -> bool:
        """Whether the next pop also looks up the recent writes. The hints announce every
        write, ack and expired lease; what they cannot hold is what was written before they
        began. So: every second while the hints are young, hints or not (work written just
        before they began must not wait behind a stream of hinted work); after that only as a
        safety net, when there are no hints to check and not more than every
        SAFETY_SCAN_INTERVAL seconds."""
        if now - self.began < CATCH_UP_SECONDS:
            return now - self.last_scan >= SCAN_INTERVAL
        return not self.hints and now - self.last_scan >= SAFETY_SCAN_INTERVAL

    def add(self, partition_ids) -> None:
        hints = self.hints
        for partition_id in partition_ids:
            hints[partition_id] = None  # a partition already hinted keeps its place
        if len(hints) > MAX_HINTS_PER_READER:
            while len(hints) > MAX_HINTS_PER_READER:
                del hints[next(iter(hints))]
            self.begin()  # a dropped hint is the sweep's again


class HotPartitions:
    """Per process: {queue: {group: reader}}."""

    def __init__(self) -> None:
        self._queues: dict[str, dict[str, _Reader]] = {}
        self._idle_checked = time.monotonic()

    def pushed(self, queue: str, partition_ids: list[str]) -> None:
        """Partitions of ``queue`` got data: every reader of the queue gets them as hints."""
        readers = self._queues.get(queue)
        if readers:
            for reader in readers.values():
                reader.add(partition_ids)

    def take(self, queue: str, group: str, partitions: int) -> tuple[list[str], datetime, bool]:
        """The oldest hints for a pop that may claim ``partitions`` partitions (removed: the pop
        hands back those it did not get to), since when the hints are complete, and whether
        this pop must also look up the recently written partitions (see ``_Reader.scan_due``)."""
        now = time.monotonic()
        if now - self._idle_checked >= IDLE_READER_SECONDS:
            self._forget_idle(now)
        readers = self._queues.setdefault(queue, {})
        reader = readers.get(group)
        if reader is None:
            reader = readers[group] = _Reader()
        reader.last_pop = now
        scan = reader.scan_due(now)
        if scan:
            reader.last_scan = now
        hints = reader.hints
        wanted = min(len(hints), max(8, 2 * partitions), MAX_HINTS_PER_POP)
        taken = []
        for _ in range(wanted):
            partition_id = next(iter(hints))
            del hints[partition_id]
            taken.append(partition_id)
        return taken, datetime.fromtimestamp(reader.since, UTC), scan

    def has_readers(self) -> bool:
        now = time.monotonic()
        if now - self._idle_checked >= IDLE_READER_SECONDS:
            self._forget_idle(now)
        return any(self._queues.values())

    def lease_expired(self, queue: str, group: str, partition_id: str) -> bool:
        """A lease of the reader ran out (see expiries.py): the partition is a hint again.
        False when this process has no such reader."""
        reader = self._queues.get(queue, {}).get(group)
        if reader is None:
            return False
        reader.add((partition_id,))
        return True

    def scan_due(self, queue: str, group: str) -> bool:
        """Whether the reader's next pop looks up the recently written partitions anyway."""
        reader = self._queues.get(queue, {}).get(group)
        return reader is None or reader.scan_due(time.monotonic())

    def give_back(self, queue: str, group: str, partition_ids: list[str]) -> None:
        """Hints a pop did not get to (its batch was full first): they stay, behind the others."""
        reader = self._queues.get(queue, {}).get(group)
        if reader is not None and partition_ids:
            reader.add(partition_ids)

    def changed(self, queue: str) -> None:
        """Something of ``queue`` became deliverable without naming its partitions (a consumer
        group sought backwards): its readers' hints begin again, so the sweep covers it all."""
        for reader in self._queues.get(queue, {}).values():
            reader.begin()

    def forget(self) -> None:
        """The listener reconnected: hints may have been missed, so they begin again."""
        for queue in self._queues:
            self.changed(queue)

    def _forget_idle(self, now: float) -> None:
        self._idle_checked = now
        for queue in list(self._queues):
            readers = self._queues[queue]
            for group in [g for g, reader in readers.items() if now - reader.last_pop > IDLE_READER_SECONDS]:
                del readers[group]
            if not readers:
                del self._queues[queue]
