"""The partition directory (rq_directory, 020_members.sql), on the catalog: which id, and so
which member (store/members.py, home_of), each (queue, partition) name has. A name is listed
once, by whichever claim comes first, and never changes but by a rebalance (docs/shards.md)."""

from __future__ import annotations

import uuid

from reginamq.store.database import Family, Row

CLAIM_SQL = "SELECT queue, partition, id FROM rq_directory_claim($1, $2, $3)"
LOOKUP_SQL = """
SELECT d.queue, d.partition, d.id
FROM unnest($1::text[], $2::text[]) AS c(queue, partition)
JOIN rq_directory d ON d.queue = c.queue AND d.partition = c.partition
"""
FORGET_SQL = "DELETE FROM rq_directory WHERE queue = $1"
RELIST_SQL = "SELECT rq_directory_relist($1, $2, $3)"

Names = dict[tuple[str, str], uuid.UUID]


class Directory(Family):
    async def claim(self, proposed: Names) -> Names:
        """Lists each name of ``proposed`` with its id unless listed already; answers the id
        listed for every name, which is the proposed one unless another claim came first."""
        rows = await self._db.fetch(CLAIM_SQL, *_columns(list(proposed)), list(proposed.values()))
        return _listed(rows)

    async def lookup(self, names: list[tuple[str, str]]) -> Names:
        """The listed id of each of ``names`` that is listed."""
        return _listed(await self._db.fetch(LOOKUP_SQL, *_columns(names)))

    async def relist(self, moved: Names) -> None:
        """Lists each name of ``moved`` under its new id (a rebalance moved it)."""
        await self._db.execute(RELIST_SQL, *_columns(list(moved)), list(moved.values()))

    async def forget(self, queue: str) -> None:
        """Unlists every partition of ``queue`` (deleted on every member)."""
        await self._db.execute(FORGET_SQL, queue)


def _columns(names: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [queue for queue, _ in names], [partition for _, partition in names]


def _listed(rows: list[Row]) -> Names:
    return {(row["queue"], row["partition"]): row["id"] for row in rows}
