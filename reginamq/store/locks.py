"""Locks and semaphores (017_locks.sql): a permit is one key/value row of the ``queen-locks``
namespace, keyed ``name#slot``, whose version is the fencing token and whose expiry is the
permit's lifetime. Each method is one statement, committed on its own, and answers Queen's
verdict as JSON text: a lock somebody else holds is a verdict, never an error."""

from __future__ import annotations

from reginamq.store.database import Family

ACQUIRE_SQL = "SELECT rq_lock_acquire($1, $2, $3, $4)"
RENEW_SQL = "SELECT rq_lock_renew($1, $2, $3, $4, $5)"
RELEASE_SQL = "SELECT rq_lock_release($1, $2, $3)"
HOLDERS_SQL = "SELECT jsonb_build_object('holders', rq_lock_holders($1))"


class Locks(Family):
    async def acquire(self, name: str, owner: str, ttl_seconds: int, limit: int) -> str:
        """Takes a permit of ``name`` (``limit`` slots) for ``ttl_seconds``: the one ``owner``
        already holds (``already: true``, for an acquire sent again), or the lowest free slot
        (``acquired: true`` with its slot, token, expiry and guard). All slots held:
        ``acquired: false`` with the live holders."""
        return await self._db.fetchval(ACQUIRE_SQL, name, owner, ttl_seconds, limit)

    async def renew(self, name: str, token: int, slot: int | None, owner: str | None, ttl_seconds: int) -> str:
        """Gives the live permit held at ``token`` (or by ``owner``, for a renew sent again) a new
        token and lifetime (``renewed: true``); ``slot`` None: whichever slot the token holds.
        A permit that expired or changed hands: ``renewed: false, reason: lost`` with the holders."""
        return await self._db.fetchval(RENEW_SQL, name, token, slot, owner, ttl_seconds)

    async def release(self, name: str, token: int, slot: int | None) -> str:
        """Deletes the live permit held at ``token`` (``released: true`` with its slot);
        ``released: false, reason: lost`` when there is none."""
        return await self._db.fetchval(RELEASE_SQL, name, token, slot)

    async def holders(self, name: str) -> str:
        """``{"holders": [...]}``: the live permits of ``name`` by slot, an empty list for none."""
        return await self._db.fetchval(HOLDERS_SQL, name)
