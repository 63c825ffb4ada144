"""The key/value store (rq_kv; 016_kv.sql): a call's validated ops applied by one function.

A ``required`` op that loses its precondition makes PostgreSQL roll the statement back with a
check violation whose detail is the verdict; it leaves the store as :class:`PreconditionFailed`,
so the caller's transaction (a kv call of its own, or a transaction's rider) rolls back with it.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec

from reginamq.store.database import Family

APPLY_SQL = "SELECT rq_kv_apply($1::jsonb, $2)"
_PRECONDITION = "kv_precondition_failed"


class PreconditionFailed(Exception):
    """A ``required`` op lost its precondition; nothing of the call was applied."""

    def __init__(self, index: int, reason: str, version: int, value: Any):
        super().__init__(_PRECONDITION)
        self.index, self.reason, self.version, self.value = index, reason, version, value


class KeyValues(Family):
    async def apply(self, ops: str, read_bytes: int) -> str:
        """Applies ``ops`` (the JSON array of ops in apply order: writes and checks in byte
        order of (namespace, key), reads of many keys last) in one statement, and answers the
        JSON array of results, each carrying its op's ``index``; reads of several keys share
        ``read_bytes`` and a cut one says ``truncated``. A lost precondition is a verdict in its
        result, unless the op is ``required``: then nothing is applied and
        :class:`PreconditionFailed` says which op (``index``) lost, why, and what a reader sees."""
        try:
            return await self._db.fetchval(APPLY_SQL, ops, read_bytes)
        except asyncpg.CheckViolationError as error:
            if error.message != _PRECONDITION:
                raise
            # msgspec, not orjson: a stored integer past 64 bits comes back exactly
            verdict = msgspec.json.decode(error.detail)
            raise PreconditionFailed(verdict["index"], verdict["reason"], verdict["version"],
                                     verdict["value"]) from None
