"""Streaming queries (rq_stream_queries, rq_stream_state; 015_streams.sql): a query registered
by name with the hash of its operator chain, and its state rows per (query, partition, key)."""

from __future__ import annotations

from reginamq.store.database import Family, Row

REGISTER_SQL = "SELECT query_id::text, fresh, did_reset, conflict FROM rq_stream_register($1, $2, $3, $4, $5, $6)"
STATE_SQL = "SELECT key, value, updated_at FROM rq_stream_state_get($1, $2, $3, $4, $5)"
APPLY_SQL = "SELECT rq_stream_state_apply($1, $2, $3, $4, $5)"


class Streams(Family):
    async def register(self, name: str, source: str, sink: str | None, config_hash: str, reset: bool,
                       query_id: str | None = None) -> Row:
        """Registers (or finds) query ``name``, atomically; concurrent registrations of one name
        meet on its row lock. The row is (``query_id``, ``fresh``: created now, ``did_reset``,
        ``conflict``): another ``config_hash`` is a conflict (nothing changed) unless ``reset``,
        which wipes the query's state and takes the new hash. A query created gets ``query_id``
        when given."""
        row = await self._db.fetchrow(REGISTER_SQL, name, source, sink, config_hash, reset, query_id)
        assert row is not None  # the function answers one row on every path
        return row

    async def state(self, query_id: str, partition_id: str, keys: list[str], prefix: str | None,
                    ripe_at_or_before: int | None) -> list[Row]:
        """A partition's state rows of a query (``key``, ``value`` as JSON text, ``updated_at``)
        in key order: all of them, or the named ``keys`` (when any), or those starting with
        ``prefix``, or those whose ``value.windowEnd`` (epoch ms) is at or before
        ``ripe_at_or_before``; the filters combine. An empty list when nothing matches."""
        return await self._db.fetch(STATE_SQL, query_id, partition_id, keys, prefix, ripe_at_or_before)

    async def apply(self, query_id: str, partition_id: str, deletes: list[bool], keys: list[str],
                    values: list[str | None]) -> str | None:
        """Applies a cycle's state changes in order (``deletes[i]``: delete ``keys[i]``, else
        upsert it to the JSON text ``values[i]``), after the transaction-scoped lock that
        serialises the cycles and idle flushes of one (query, partition); answers the source
        partition's queue name, or None (nothing applied) when the query or the partition does
        not exist. Run it inside :meth:`Store.atomically` for the lock to cover the cycle's
        other writes."""
        return await self._db.fetchval(APPLY_SQL, query_id, partition_id, deletes, keys, values)
