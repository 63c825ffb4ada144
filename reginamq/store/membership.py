"""Membership rows (rq_member_self, rq_members; 020_members.sql): who this database is, and the
members of the deployment it belongs to. store/members.py forms and checks a deployment from
these; docs/shards.md says what a member is."""

from __future__ import annotations

import uuid

from reginamq.store.database import Family

STATE_SQL = """
SELECT (SELECT id FROM rq_member_self) AS id, (SELECT array_agg(id ORDER BY ordinal) FROM rq_members) AS members
"""
FORM_SQL = "SELECT rq_form_members($1)"
PREPARED_ALLOWED_SQL = "SELECT current_setting('max_prepared_transactions')::int > 0"


class Membership(Family):
    async def state(self) -> tuple[uuid.UUID, list[uuid.UUID]]:
        """This database's own id, and the ids of its deployment's members in ordinal order
        (empty while it belongs to none)."""
        row = await self._db.fetchrow(STATE_SQL)
        return row["id"], list(row["members"] or [])

    async def form(self, ids: list[uuid.UUID]) -> bool:
        """Writes ``ids`` as the members, ordinals in list order, and answers True; answers
        False, writing nothing, when this database is in a deployment already or a broker
        forming one holds its rows past a bounded wait."""
        return bool(await self._db.fetchval(FORM_SQL, ids))

    async def prepared_transactions_allowed(self) -> bool:
        """Whether PostgreSQL here allows PREPARE TRANSACTION (max_prepared_transactions > 0)."""
        return bool(await self._db.fetchval(PREPARED_ALLOWED_SQL))
