"""Membership rows (rq_member_self, rq_members; 020_members.sql): who this database is, and the
members of the deployment it belongs to. store/members.py forms and checks a deployment from
these; docs/shards.md says what a member is."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from reginamq.store.database import Family

STATE_SQL = """
SELECT s.id, s.numbers_from, (SELECT array_agg(id ORDER BY ordinal) FROM rq_members) AS members,
       (SELECT last_value FROM rq_partition_numbers) AS last_number
FROM rq_member_self s
"""
FORM_SQL = "SELECT rq_form_members($1, $2)"
HELD_SQL = "SELECT rq_members_held()"
REPLICATED_SQL = "SELECT queues, groups, streams FROM rq_replicated()"
TAKE_REPLICATED_SQL = "SELECT rq_take_replicated($1::jsonb, $2::jsonb, $3::jsonb)"
ADMIT_SQL = "SELECT rq_admit_member($1, $2)"
HOLDS_QUEUES_SQL = "SELECT EXISTS (SELECT 1 FROM rq_queues) OR EXISTS (SELECT 1 FROM rq_partitions)"
PREPARED_ALLOWED_SQL = "SELECT current_setting('max_prepared_transactions')::int > 0"
REPORT_SQL = """
SELECT s.id, m.ordinal, pg_database_size(current_database()) AS size_bytes, d.numbackends AS connections,
       d.xact_commit AS commits
FROM rq_member_self s
LEFT JOIN rq_members m ON m.id = s.id
LEFT JOIN pg_stat_database d ON d.datname = current_database()
"""


@dataclass(frozen=True)
class MemberState:
    id: uuid.UUID  # this database's own
    members: list[uuid.UUID]  # in ordinal order; empty while in no deployment
    numbers_from: int | None  # the first partition number that tells its member (020_members.sql)
    last_number: int  # the last partition number this database gave out


class Membership(Family):
    async def state(self) -> MemberState:
        """Who this database is and which deployment it belongs to."""
        row = await self._db.fetchrow(STATE_SQL)
        return MemberState(row["id"], list(row["members"] or []), row["numbers_from"], row["last_number"])

    async def form(self, ids: list[uuid.UUID], numbers_from: int) -> bool:
        """Writes ``ids`` as the members, ordinals in list order, and partition numbers from
        ``numbers_from`` on tell their member; answers True. Answers False, writing nothing,
        when this database is in a deployment already or a broker forming one holds its rows
        past a bounded wait."""
        return bool(await self._db.fetchval(FORM_SQL, ids, numbers_from))

    async def held(self) -> int:
        """On the catalog, in a unit that writes what every member holds: how many members the
        deployment has, their rows locked for share until the unit ends, so that no member is
        added meanwhile (rq_members_held, 020_members.sql)."""
        return await self._db.fetchval(HELD_SQL)

    async def replicated(self) -> tuple[str, str, str]:
        """On the catalog, in the unit that adds a member: what every member holds (queues,
        consumer-group subscriptions, stream queries, each as JSON), the members' rows locked
        against every writer of it until the unit ends."""
        row = await self._db.fetchrow(REPLICATED_SQL)
        return row["queues"], row["groups"], row["streams"]

    async def take_replicated(self, replicated: tuple[str, str, str]) -> None:
        """On the member being added: what :meth:`replicated` read on the catalog."""
        await self._db.execute(TAKE_REPLICATED_SQL, *replicated)

    async def admit(self, member: uuid.UUID, ordinal: int) -> None:
        """On a member: lists the added member ``member`` under ``ordinal``."""
        await self._db.execute(ADMIT_SQL, member, ordinal)

    async def holds_queues(self) -> bool:
        """Whether any queue or partition is here (a database to be added must hold none)."""
        return bool(await self._db.fetchval(HOLDS_QUEUES_SQL))

    async def prepared_transactions_allowed(self) -> bool:
        """Whether PostgreSQL here allows PREPARE TRANSACTION (max_prepared_transactions > 0)."""
        return bool(await self._db.fetchval(PREPARED_ALLOWED_SQL))

    async def report(self) -> dict:
        """What ``status`` shows of this database: its id and ordinal (None before the deployment
        is formed), its size on disk, its open connections and the transactions it committed
        since its statistics were last reset."""
        row = await self._db.fetchrow(REPORT_SQL)
        return {"id": str(row["id"]), "ordinal": row["ordinal"], "catalog": row["ordinal"] == 0,
                "sizeBytes": row["size_bytes"], "connections": row["connections"],
                "transactionsCommitted": row["commits"]}
