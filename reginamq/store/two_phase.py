"""Transactions that span several member databases: all of them commit, or none does.

PostgreSQL's two-phase commit does the work. The outcome is one row in the catalog's
``rq_decisions`` (020_members.sql), and that row is the whole protocol (docs/shards.md,
"Transactions across members", says why it is safe). :meth:`TwoPhase.atomically` proceeds in
four steps:

1. Run the unit; each member it uses joins in a transaction of its own (:class:`Joined`).
2. ``PREPARE TRANSACTION`` on every member that joined.
3. Record ``commit`` on the catalog. That commit is the decision.
4. ``COMMIT PREPARED`` everywhere.

A unit that used one member only commits it as an ordinary transaction: nothing is prepared.

:meth:`TwoPhase.recover` finishes what a coordinator left behind. For every prepared
transaction older than ``in_doubt_after`` it records ``abort`` unless an outcome is recorded,
then carries out the recorded outcome. A coordinator that stalled past that bound therefore
finds ``abort`` when it comes to decide, and rolls back.

:meth:`TwoPhase.run` gives each member its work up front and runs it one member at a time, in
ordinal order. Each member's calls lock partitions in their global order, so every lock such
a transaction takes follows one order over the whole deployment: member, then partition, and
a wait between two databases, which neither database can see as a deadlock, cannot form a
cycle. A unit of :meth:`TwoPhase.atomically` takes members in the order its calls need them,
so its waits could form such a cycle: a lock wait in a member's transaction is bounded, and a
unit that waited past the bound is rolled back everywhere and tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import asyncpg

from reginamq.common import failpoints
from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.database import RETRYABLE, Connection, Database, Session, retried
from reginamq.store.notices import send_after_commit

T = TypeVar("T")
# What a prepared transaction's name starts with: the kind of coordinator that made it, so that
# each recovery finishes only its own (members.py forms a deployment with a catalog of its own).
MEMBER_TRANSACTIONS = "rq"
IN_DOUBT_AFTER = 30.0
# Outcomes kept after their transaction is finished everywhere, for a member that was away.
DECISIONS_KEPT_SECONDS = 86_400

# A member's part of a unit: a lock wait longer than this is taken for a wait across databases
# and the unit is tried again (TwoPhase.atomically).
BEGIN_SQL = "BEGIN; SET LOCAL lock_timeout = '5s'"
DECIDE_SQL = "SELECT rq_decide($1, $2, $3)"
PREPARED_SQL = """
SELECT gid, prepared < now() - make_interval(secs => $1) AS in_doubt
FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $2 || ':')
"""
FORGET_SQL = "DELETE FROM rq_decisions WHERE gid = $1"
FORGET_DECISIONS_SQL = """
DELETE FROM rq_decisions
WHERE kind = $3 AND decided_at < now() - make_interval(secs => $1) AND NOT (gid = ANY ($2::uuid[]))
"""


def transaction_name(gid: uuid.UUID, ordinal: int, kind: str = MEMBER_TRANSACTIONS) -> str:
    """The prepared transaction's name on member ``ordinal``: unique in a PostgreSQL server that
    holds several members as databases of its own."""
    return f"{kind}:{gid}:{ordinal}"


def _gid_of(name: str) -> uuid.UUID:
    return uuid.UUID(name.split(":")[1])


class Joined:
    """The member transactions of one unit of :meth:`TwoPhase.atomically`: a member's begins
    at its first use (:meth:`store`), on a connection held until the unit is finished."""

    def __init__(self, members: Mapping[int, Database], held: contextlib.AsyncExitStack):
        self._members = members
        self._held = held
        self._joining = asyncio.Lock()
        self._sessions: dict[int, Session] = {}
        self.connections: dict[int, Connection] = {}

    async def store(self, ordinal: int) -> Store:
        """The store whose every call runs in this unit's transaction on member ``ordinal``."""
        async with self._joining:
            if ordinal not in self._sessions:
                conn = await self._held.enter_async_context(self._members[ordinal].holding())
                self.connections[ordinal] = conn
                await conn.execute(BEGIN_SQL)
                self._sessions[ordinal] = Session(conn, defers_notices=True)
        return Store(self._sessions[ordinal])

    async def announce(self) -> None:
        """Sends the notices the members' transactions kept, once they are committed."""
        for ordinal, session in self._sessions.items():
            for channel, notices in session.deferred or []:
                await send_after_commit(self.connections[ordinal], channel, notices)


class TwoPhase:
    """The coordinator over ``members`` (ordinal → database), member 0 recording the outcomes;
    ``kind`` names its transactions (every coordinator of one kind must agree on member 0)."""

    def __init__(self, members: Mapping[int, Database], in_doubt_after: float = IN_DOUBT_AFTER,
                 kind: str = MEMBER_TRANSACTIONS):
        self._members = dict(members)
        self._catalog = self._members[0]
        self._in_doubt_after = in_doubt_after
        self._kind = kind

    def admit(self, ordinal: int, database: Database) -> None:
        """Member ``ordinal`` was added to the deployment: units may use it from now on."""
        self._members[ordinal] = database

    async def run(self, work: Mapping[int, Callable[[Store], Awaitable[T]]]) -> dict[int, T]:
        """Each ``work[ordinal]`` given a store whose every call runs in one transaction on that
        member, one member after another in ordinal order (see the module header): the
        :meth:`atomically` of a unit that takes part on those members only."""
        async def unit(joined: Joined) -> dict[int, T]:
            return {ordinal: await work[ordinal](await joined.store(ordinal)) for ordinal in sorted(work)}

        return await self.atomically(unit)

    async def atomically(self, unit: Callable[[Joined], Awaitable[T]]) -> T:
        """``unit`` given the members' transactions (each begun when the unit first uses it).
        Every member it used commits when it returns, or none does, and whatever it raised is
        raised here; a unit that used one member commits it as an ordinary transaction. A
        deadlock or serialization failure is retried whole, as ``Database.atomically`` retries,
        and so is a lock a member's transaction waited for past its bound: a unit that takes
        its members in any order may wait across two databases, where no database sees a
        deadlock. :class:`Unavailable` means nothing was committed, or the outcome is not known
        yet: the recovery settles it one way for every member."""
        return await retried(lambda: self._attempt(unit), (*RETRYABLE, asyncpg.LockNotAvailableError))

    async def _attempt(self, unit: Callable[[Joined], Awaitable[T]]) -> T:
        gid = uuid.uuid4()
        async with contextlib.AsyncExitStack() as held:
            joined = Joined(self._members, held)
            connections = joined.connections
            prepared: list[tuple[Connection, str]] = []
            try:
                result = await unit(joined)
                if len(connections) <= 1:
                    for conn in connections.values():
                        await conn.execute("COMMIT")
                    await joined.announce()
                    return result
                failpoints.reach("prepare")
                for ordinal, conn in sorted(connections.items()):
                    name = transaction_name(gid, ordinal, self._kind)
                    await conn.execute(f"PREPARE TRANSACTION '{name}'")
                    prepared.append((conn, name))
                    failpoints.reach("prepared-some")
            except BaseException:
                await _abandon(connections, prepared)
                raise
            # On the catalog's held connection when it takes part (its session is free once
            # prepared): a coordinator never waits for a second connection of a pool it holds
            # one of. If this fails, the outcome is unknown here; the prepared transactions
            # wait for the recovery, which reads the outcome this insert may have recorded.
            catalog = connections.get(0, self._catalog)
            failpoints.reach("decide")
            outcome = await catalog.fetchval(DECIDE_SQL, gid, "commit", self._kind)
            failpoints.reach("commit")

            async def finish(conn: Connection, name: str) -> None:
                await _finish(conn, name, outcome)
                failpoints.reach("committed-some")

            finished = await asyncio.gather(*(finish(conn, name) for conn, name in prepared),
                                            return_exceptions=True)
            failpoints.reach("answer")
            if outcome == "commit":
                await joined.announce()
                if not any(isinstance(done, BaseException) for done in finished):
                    await catalog.execute(FORGET_SQL, gid)
        if outcome == "abort":
            raise Unavailable("the transaction was held past its bound and rolled back; retry")
        return result

    async def recover(self) -> int:
        """Finishes every transaction prepared on a reachable member longer ago than the bound,
        as its recorded outcome says or, if none is recorded, by recording ``abort``. Forgets
        outcomes no member waits for once every member answered. Returns how many it finished."""
        found = await asyncio.gather(
            *(member.fetch(PREPARED_SQL, self._in_doubt_after, self._kind) for member in self._members.values()),
            return_exceptions=True)
        finished = 0
        waiting: list[uuid.UUID] = []
        for member, rows in zip(self._members.values(), found, strict=True):
            if isinstance(rows, Unavailable):
                continue
            if isinstance(rows, BaseException):
                raise rows
            for row in rows:
                gid = _gid_of(row["gid"])
                waiting.append(gid)
                if not row["in_doubt"]:
                    continue
                outcome = await self._catalog.fetchval(DECIDE_SQL, gid, "abort", self._kind)
                # finished meanwhile (undefined), or being finished now (busy), by another
                with contextlib.suppress(asyncpg.UndefinedObjectError, asyncpg.ObjectNotInPrerequisiteStateError):
                    await member.run(lambda conn, name=row["gid"], outcome=outcome: _finish(conn, name, outcome))
                    finished += 1
        if not any(isinstance(rows, BaseException) for rows in found):
            await self._catalog.execute(FORGET_DECISIONS_SQL, DECISIONS_KEPT_SECONDS, waiting, self._kind)
        return finished

    async def waiting(self) -> int:
        """How many of this kind's transactions stand prepared on the reachable members, of any age."""
        found = await asyncio.gather(*(member.fetch(PREPARED_SQL, 0, self._kind) for member in self._members.values()),
                                     return_exceptions=True)
        return sum(len(rows) for rows in found if not isinstance(rows, BaseException))


async def _finish(conn: Connection, name: str, outcome: str) -> None:
    verb = "COMMIT" if outcome == "commit" else "ROLLBACK"
    await conn.execute(f"{verb} PREPARED '{name}'")


async def _abandon(connections: Mapping[int, Connection], prepared: list[tuple[Connection, str]]) -> None:
    """Undoes a transaction that failed before its outcome was decided: no outcome can be
    ``commit`` (only this coordinator records that), so the ``prepared`` ones roll back. What
    cannot be reached now is left to the recovery, which records ``abort``."""
    for conn in connections.values():
        with contextlib.suppress(Exception):
            if conn.is_in_transaction():
                await conn.execute("ROLLBACK")
    for conn, name in prepared:
        with contextlib.suppress(Exception):
            await conn.execute(f"ROLLBACK PREPARED '{name}'")
