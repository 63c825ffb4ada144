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
