"""Queues made and partition ids minted ahead of a push, on one member of a deployment of several
databases (020_members.sql, docs/shards.md "Placement and the directory").

On a single database a push creates what it names itself (rq_push). Over several members the
directory decides a new partition's id before the partition exists (the push then creates it
with that id on its home), and a new queue is created on every member, with the id the catalog
gave it: these are the calls for that.
"""

from __future__ import annotations

import uuid

from reginamq.store.database import Family

EXISTING_QUEUES_SQL = "SELECT name, id FROM rq_queues WHERE name = ANY($1::text[])"
SELECTED_QUEUES_SQL = ("SELECT name, id FROM rq_queues "
                       "WHERE ($1::text IS NULL OR namespace = $1) AND ($2::text IS NULL OR task = $2)")
CREATE_QUEUES_SQL = "SELECT rq_provision_queues($1, $2::jsonb, $3)"
MINT_SQL = "SELECT rq_mint_partition_ids($1)"


class Provisioning(Family):
    async def existing_queues(self, queues: list[str]) -> dict[str, int]:
        """The id of each of ``queues`` that exists."""
        return {row[0]: row[1] for row in await self._db.fetch(EXISTING_QUEUES_SQL, queues)}

    async def selected_queues(self, namespace: str | None, task: str | None) -> dict[str, int]:
        """The id of each queue a pop of ``namespace`` and ``task`` reads (None: any)."""
        return {row[0]: row[1] for row in await self._db.fetch(SELECTED_QUEUES_SQL, namespace, task)}

    async def create_queues(self, queues: list[str], options: str, ids: list[int] | None = None) -> None:
        """Creates the queues of ``queues`` that do not exist, with ``options`` (JSON text) and
        with ``ids`` (one a queue: the catalog's), or ids of this database's own numbering."""
        await self._db.execute(CREATE_QUEUES_SQL, queues, options, ids)

    async def mint(self, count: int) -> list[uuid.UUID]:
        """``count`` fresh partition ids of this database's own numbers."""
        return await self._db.fetchval(MINT_SQL, count)
