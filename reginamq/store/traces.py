"""Traces (rq_traces, rq_trace_names; 011_traces.sql): events recorded against a message
address, found again by message or by any of their names."""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family, Row

ADD_SQL = "SELECT rq_trace_add($1, $2, $3, $4, $5, $6::text::jsonb, $7)"
FOR_MESSAGE_SQL = "SELECT * FROM rq_traces_for_message($1, $2, $3)"
BY_NAME_SQL = "SELECT * FROM rq_traces_by_name($1, $2, $3, $4, $5)"
NAMES_SQL = "SELECT * FROM rq_trace_names_page($1, $2, $3)"


class Traces(Family):
    async def add(self, trace_id: str, partition_id: str, txid: str, group: str | None, event_type: str,
                  data: str, names: list[str]) -> datetime:
        """Records trace ``trace_id`` (``data``: JSON text, stored as jsonb) with its names,
        atomically; answers when it was recorded. The message need not exist."""
        return await self._db.fetchval(ADD_SQL, trace_id, partition_id, txid, group, event_type, data, names)

    async def for_message(self, partition_id: str, txid: str, limit: int) -> list[Row]:
        """Up to ``limit`` traces of the message (partition, transactionId), oldest first, ``data``
        as JSON text and the queue and partition names NULL once the partition is gone; an empty
        list when it has none."""
        return await self._db.fetch(FOR_MESSAGE_SQL, partition_id, txid, limit)

    async def by_name(self, name: str, since: datetime | None, until: datetime | None, limit: int,
                      offset: int) -> list[Row]:
        """A page of the traces carrying ``name`` (created within the range), newest first; each
        row carries ``total``, the size of the whole filtered set. An empty list past the end."""
        return await self._db.fetch(BY_NAME_SQL, name, since, until, limit, offset)

    async def names(self, search: str | None, limit: int, offset: int) -> list[Row]:
        """A page of the trace names (containing ``search``, any case, when given), the most recently used
        first, with how many traces and messages carry each; each row carries ``total``. An
        empty list past the end."""
        return await self._db.fetch(NAMES_SQL, search, limit, offset)
