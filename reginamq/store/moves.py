"""A member database's part in moving idle partitions between members (021_moves.sql;
docs/shards.md, "Rebalancing"): which of its partitions are idle, taking some out with every
row they own, writing moved rows in under new ids, and the names that moved away from here.
store/rebalance.py runs a move over the old home, the new home and the catalog in one
two-phase transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from reginamq.store.database import Family, Row

MOVABLE_SQL = "SELECT id, queue, partition FROM rq_movable($1, $2, $3, $4)"
MOVE_OUT_SQL = ("SELECT partitions, segments, dedup, dedup_runs, consumers, dead_letters, deleted, traces, "
                "trace_names, stream_state FROM rq_move_out($1, $2)")
MOVE_IN_SQL = ("SELECT rq_move_in($1, $2, $3::rq_partitions[], $4::rq_segments[], $5::rq_dedup[], "
               "$6::rq_dedup_runs[], $7::rq_consumers[], $8::rq_dlq[], $9::rq_deleted[], $10::rq_traces[], "
               "$11::rq_trace_names[], $12::rq_stream_state[])")
MOVED_SINCE_SQL = "SELECT queue, partition, moved_at FROM rq_moved_since($1)"
# rq_move_out's columns, in the order rq_move_in takes them
_TABLES = ("partitions", "segments", "dedup", "dedup_runs", "consumers", "dead_letters", "deleted", "traces",
           "trace_names", "stream_state")
_FIRST_ID = uuid.UUID(int=0)


@dataclass(frozen=True)
class Taken:
    """Partitions taken out of their old home, with every row they own (one list a table)."""

    rows: dict[str, list[tuple]]

    @property
    def ids(self) -> list[uuid.UUID]:
        return [row[0] for row in self.rows["partitions"]]


class Moves(Family):
    async def movable(self, after: uuid.UUID | None, limit: int, idle_seconds: float,
                      queue: str | None) -> list[Row]:
        """``(id, queue, partition)`` of up to ``limit`` idle partitions here (of ``queue``,
        or of every queue), in id order after ``after``: nothing written for ``idle_seconds``,
        no live lease, nothing unconsumed by a reader with a cursor on them."""
        return await self._db.fetch(MOVABLE_SQL, after or _FIRST_ID, limit, idle_seconds, queue)

    async def take_out(self, ids: list[uuid.UUID], idle_seconds: float) -> Taken:
        """Takes the partitions of ``ids`` that are still idle and that nothing holds out of
        this database, and answers them with their rows; their names are listed as moved."""
        row = await self._db.fetchrow(MOVE_OUT_SQL, ids, idle_seconds)
        return Taken({table: [tuple(record) for record in row[table]] for table in _TABLES})

    async def put_in(self, taken: Taken, new_ids: list[uuid.UUID]) -> None:
        """Writes what :meth:`take_out` answered here, partition ``taken.ids[i]`` as
        ``new_ids[i]``."""
        await self._db.execute(MOVE_IN_SQL, taken.ids, new_ids, *(taken.rows[table] for table in _TABLES))

    async def moved_since(self, since: datetime | None) -> list[Row]:
        """``(queue, partition, moved_at)`` of the names that moved away from here after
        ``since`` (None: in the last ten minutes; the ten seconds before ``since`` are
        answered again, see rq_moved_since), oldest first."""
        return await self._db.fetch(MOVED_SINCE_SQL, since)
