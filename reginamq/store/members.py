"""The member databases of a deployment: who each one is, and the checks a broker makes before
it serves (docs/shards.md, "Membership").

Identity is the id each database mints for itself (``rq_member_self``, 020_members.sql),
never its URL. Every member holds the same list of members (``rq_members``). :func:`join_up`
runs at start, after the schema. When every database given is new to membership, it forms
the deployment: the first URL becomes the catalog (ordinal 0) and the others follow in the
order given, all written in one two-phase transaction so no database is left half formed.
Otherwise it checks that the databases given are exactly the members and that they agree,
and raises :class:`MembershipMismatch`, naming the mismatch, when they do not. A broker that
starts at the same moment waits on the catalog's lock, then finds the deployment formed.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.schema import DatabaseUnusable, where
from reginamq.store.two_phase import TwoPhase

# Held, as a session lock, on the database of smallest id while a broker forms: brokers given
# the same databases in different orders form one at a time.
FORMING_LOCK_KEY = 0x5245_474D_4252  # "REGMBR"


class MembershipMismatch(DatabaseUnusable):
    """The databases given are not the members of one deployment; the message says how."""


class _FormedMeanwhile(Exception):
    """A database of the list is in a deployment already, or another broker is forming one over
    it: nothing was written anywhere, and the caller looks again."""


@dataclass(frozen=True)
class Member:
    id: uuid.UUID
    ordinal: int
    database: Database


async def join_up(databases: list[Database]) -> list[Member]:
    """The members, in ordinal order, each with the database of ``databases`` that reaches it.
    Forms the deployment when none of ``databases`` belongs to one yet."""
    while True:
        ids, lists = await _states(databases)
        if any(lists):
            _check_agreement(databases, ids, lists)
            by_id = dict(zip(ids, databases, strict=True))
            return [Member(member_id, ordinal, by_id[member_id])
                    for ordinal, member_id in enumerate(next(members for members in lists if members))]
        if len(databases) > 1:
            for database in databases:
                if not await Store(database).membership.prepared_transactions_allowed():
                    raise DatabaseUnusable(f"{_named(database)} does not allow prepared transactions, which "
                                           "several member databases need: set max_prepared_transactions "
                                           "(e.g. 64) and restart it")
        await _form(databases, ids)


async def _states(databases: list[Database]) -> tuple[list[uuid.UUID], list[list[uuid.UUID]]]:
    states = [await Store(database).membership.state() for database in databases]
    ids = [member_id for member_id, _ in states]
    seen: dict[uuid.UUID, Database] = {}
    for database, member_id in zip(databases, ids, strict=True):
        if member_id in seen:
            raise MembershipMismatch(f"{_named(seen[member_id])} and {_named(database)} are the same "
                                     "database; give each member once")
        seen[member_id] = database
    return ids, [members for _, members in states]


def _check_agreement(databases: list[Database], ids: list[uuid.UUID], lists: list[list[uuid.UUID]]) -> None:
    """Every database given is a member, every member is given, and all list the same members."""
    listing = next(index for index, members in enumerate(lists) if members)
    members = lists[listing]
    for database, member_id, listed in zip(databases, ids, lists, strict=True):
        if member_id not in members:
            raise MembershipMismatch(f"{_named(database)} is not a member of the deployment "
                                     f"{_named(databases[listing])} belongs to; give the databases it "
                                     "was formed with")
        if listed != members:
            raise MembershipMismatch(f"{_named(database)} and {_named(databases[listing])} list "
                                     "different members; they belong to different deployments")
    if len(members) > len(databases):
        raise MembershipMismatch(f"the deployment has {len(members)} member databases and {len(databases)} "
                                 "were given; give every member to every broker")


async def _form(databases: list[Database], ids: list[uuid.UUID]) -> None:
    """Writes the list into every database in one two-phase transaction, under the forming lock.
    Returns without writing when another broker formed meanwhile: the caller looks again."""
    arbiter = databases[ids.index(min(ids))]
    async with arbiter.holding() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", FORMING_LOCK_KEY)
        try:
            _, lists = await _states(databases)
            if any(lists):
                return

            async def write(store: Store) -> None:
                if not await store.membership.form(ids):
                    raise _FormedMeanwhile

            with contextlib.suppress(_FormedMeanwhile):
                await TwoPhase(dict(enumerate(databases))).run(dict.fromkeys(range(len(databases)), write))
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", FORMING_LOCK_KEY)


def _named(database: Database) -> str:
    return f"database {urlsplit(database.dsn).path.lstrip('/') or '(default)'} on {where(database.dsn)}"


async def check_deployment(urls: list[str]) -> list[uuid.UUID]:
    """:func:`join_up` over pools of its own: what ``reginamq serve`` runs once, after the
    schema and before its workers start. Returns the members' ids in ordinal order."""
    databases = [Database(url, 2) for url in urls]
    try:
        for database in databases:
            await database.open()
        return [member.id for member in await join_up(databases)]
    finally:
        for database in databases:
            await database.close()
