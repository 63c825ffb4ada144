"""Partitions with fresh data, per reader, so that a wildcard pop looks where the work is.

Without it a wildcard pop finds work by reading indexes whose cost grows with what they must
step over: the most recently written partitions (most of them already consumed) and a sweep of
the whole queue, so the more partitions a queue holds, the more of the database's work those
lookups become. Pushes announce the partitions they wrote in
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

A reader may also be a selection of queues, a namespace and/or task (``GET /api/v1/pop?namespace=``):
one long poll serving many queues is how a thousand queues are read without a thousand polls.
A notification names only its queue, so each process keeps a directory of which namespace and
task every queue belongs to (one small query, re-read when a notification names a queue it does
not know or a queue was configured or deleted); until then a selection gets the hint anyway,
and a pop drops those the directory, read again by then, places outside its selection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

from reginamq.store import Store

MAX_HINTS_PER_READER = 65_536
IDLE_READER_SECONDS = 60.0
SCAN_INTERVAL = 1.0
CATCH_UP_SECONDS = 5.0
SAFETY_SCAN_INTERVAL = 16.0
MAX_HINTS_PER_POP = 1_000
CLOCK_MARGIN_SECONDS = 5.0  # broker and database clocks may differ by less than this
DIRECTORY_RELOAD_SECONDS = 1.0

# What a reader reads: a queue's name, or a (namespace, task) selection of queues (either may be None).
Source = str | tuple[str | None, str | None]


class _Reader:
    __slots__ = ("began", "hints", "last_pop", "last_scan", "since")

    def __init__(self) -> None:
        # partition -> its queue (None: not known), insertion-ordered: the oldest hint first
        self.hints: dict[str, str | None] = {}
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

    def add(self, partition_ids, queue: str | None = None) -> None:
        hints = self.hints
        for partition_id in partition_ids:
            hints.setdefault(partition_id, queue)  # a partition already hinted keeps its place
        if len(hints) > MAX_HINTS_PER_READER:
            while len(hints) > MAX_HINTS_PER_READER:
                del hints[next(iter(hints))]
            self.begin()  # a dropped hint is the sweep's again


class HotPartitions:
    """Per process: {queue: {group: reader}} and {(namespace, task): {group: reader}}."""

    def __init__(self) -> None:
        self._queues: dict[str, dict[str, _Reader]] = {}
        self._selections: dict[tuple[str | None, str | None], dict[str, _Reader]] = {}
        self._idle_checked = time.monotonic()
        self._directory: dict[str, tuple[str | None, str | None]] = {}
        self._directory_stale = False
        self._directory_read = -DIRECTORY_RELOAD_SECONDS
        self._directory_generation = 0

    def pushed(self, queue: str, partition_ids: list[str]) -> None:
        """Partitions of ``queue`` got data: every reader of the queue gets them as hints."""
        for readers in self._sources_of(queue):
            for reader in readers.values():
                reader.add(partition_ids, queue)

    def take(self, source: Source, group: str, partitions: int) -> tuple[list[str], datetime, bool]:
        """The oldest hints for a pop that may claim ``partitions`` partitions (removed: the pop
        hands back those it did not get to), since when the hints are complete, and whether
        this pop must also look up the recently written partitions (see ``_Reader.scan_due``)."""
        now = time.monotonic()
        if now - self._idle_checked >= IDLE_READER_SECONDS:
            self._forget_idle(now)
        readers = self._table(source).setdefault(source, {})
        reader = readers.get(group)
        if reader is None:
            reader = readers[group] = _Reader()
        reader.last_pop = now
        scan = reader.scan_due(now)
        if scan:
            reader.last_scan = now
        hints = reader.hints
        wanted = min(max(8, 2 * partitions), MAX_HINTS_PER_POP)
        selection = None if isinstance(source, str) else source
        taken = []
        while hints and len(taken) < wanted:
            partition_id = next(iter(hints))
            queue = hints.pop(partition_id)
            # a selection got the hints of queues the directory could not place then; those
            # it places elsewhere now are dropped here rather than crowd out the selection's own
            if selection is None or self._holds(selection, queue):
                taken.append(partition_id)
        return taken, datetime.fromtimestamp(reader.since, UTC), scan

    def has_readers(self) -> bool:
        now = time.monotonic()
        if now - self._idle_checked >= IDLE_READER_SECONDS:
            self._forget_idle(now)
        return any(self._queues.values()) or any(self._selections.values())

    def lease_expired(self, queue: str, group: str, partition_id: str) -> bool:
        """A lease of the reader ran out (see lease_watcher.py): the partition is a hint again.
        False when this process has no such reader."""
        handed = False
        for readers in self._sources_of(queue):
            reader = readers.get(group)
            if reader is not None:
                reader.add((partition_id,), queue)
                handed = True
        return handed

    def scan_due(self, source: Source, group: str) -> bool:
        """Whether the reader's next pop looks up the recently written partitions anyway."""
        reader = self._table(source).get(source, {}).get(group)
        return reader is None or reader.scan_due(time.monotonic())

    def waiting(self, source: Source, group: str) -> int:
        """How many partitions are announced to the reader and not taken yet (an upper bound of
        those with work for it: another process's pops may have taken some)."""
        reader = self._table(source).get(source, {}).get(group)
        return 0 if reader is None else len(reader.hints)

    def give_back(self, source: Source, group: str, partition_ids: list[str]) -> None:
        """Hints a pop did not get to (its batch was full first): they stay, behind the others."""
        reader = self._table(source).get(source, {}).get(group)
        if reader is not None and partition_ids:
            reader.add(partition_ids)

    def changed(self, queue: str) -> None:
        """Something of ``queue`` became deliverable without naming its partitions (a consumer
        group sought backwards): its readers' hints begin again, so the sweep covers it all."""
        for readers in self._sources_of(queue):
            for reader in readers.values():
                reader.begin()

    def forget(self) -> None:
        """The listener reconnected: hints may have been missed, so they begin again."""
        for table in (self._queues, self._selections):
            for readers in table.values():
                for reader in readers.values():
                    reader.begin()
        self.forget_directory()

    def forget_directory(self) -> None:
        """A queue was configured (its namespace or task may have changed): read them again."""
        self._directory.clear()
        self._directory_generation += 1

    def directory_due(self) -> bool:
        """Whether a selection reads hints that its queues' directory cannot place yet."""
        return self._directory_stale and time.monotonic() - self._directory_read >= DIRECTORY_RELOAD_SECONDS

    async def read_directory(self, store: Store) -> None:
        self._directory_read = time.monotonic()
        self._directory_stale = False
        generation = self._directory_generation
        try:
            rows = await store.queue_settings.directory()
        except BaseException:
            self._directory_stale = True
            raise
        if generation == self._directory_generation:
            self.place_queues(rows)
        else:  # a queue was configured meanwhile: this answer may predate it
            self._directory_stale = True

    def place_queues(self, rows) -> None:
        """Which namespace and task each queue belongs to, from (name, namespace, task) rows."""
        self._directory = {name: (namespace, task) for name, namespace, task in rows}

    def _sources_of(self, queue: str) -> Iterator[dict[str, _Reader]]:
        """The readers of ``queue``: its own, and those of every selection that holds it (or may:
        a queue the directory does not know yet)."""
        own = self._queues.get(queue)
        if own:
            yield own
        if not self._selections:
            return
        if queue not in self._directory:
            self._directory_stale = True
        for selection, readers in self._selections.items():
            if self._holds(selection, queue):
                yield readers

    def _holds(self, selection: tuple[str | None, str | None], queue: str | None) -> bool:
        """Whether the selection holds the queue, or may: the directory does not place it."""
        place = self._directory.get(queue)
        if place is None:
            return True
        namespace, task = selection
        return (namespace is None or namespace == place[0]) and (task is None or task == place[1])

    def _table(self, source: Source) -> dict:
        return self._queues if isinstance(source, str) else self._selections

    def _forget_idle(self, now: float) -> None:
        self._idle_checked = now
        for table in (self._queues, self._selections):
            for source in list(table):
                readers = table[source]
                for group in [g for g, reader in readers.items() if now - reader.last_pop > IDLE_READER_SECONDS]:
                    del readers[group]
                if not readers:
                    del table[source]
