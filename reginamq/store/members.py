"""The member databases of a deployment: who each one is, where a partition lives, and the
checks a broker makes before it serves (docs/shards.md, "Membership" and "Placement").

Identity is the id each database mints for itself (``rq_member_self``, 020_members.sql),
never its URL. Every member holds the same list of members (``rq_members``). :func:`join_up`
runs at start, after the schema. When every database given is new to membership, it forms
the deployment: the first URL becomes the catalog (ordinal 0) and the others follow in the
order given, all written in one two-phase transaction so no database is left half formed.
Otherwise it checks that the databases given are exactly the members and that they agree,
and raises :class:`MembershipMismatch`, naming the mismatch, when they do not. Brokers that
start at the same moment form one at a time, under a lock on the database of smallest id.

Where a partition lives is told by its id (:func:`home_of`) and, for a new name, by the name
(:func:`place`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.membership import MemberState
from reginamq.store.schema import DatabaseUnusable, where
from reginamq.store.two_phase import IN_DOUBT_AFTER, Joined, TwoPhase

log = logging.getLogger("reginamq.members")

# Held, as a session lock, on the database of smallest id while a broker forms or reads a
# deployment halfway formed: brokers given the same databases in any order form one at a time.
FORMING_LOCK_KEY = 0x5245_474D_4252  # "REGMBR"
FORMING_TRANSACTIONS = "rqform"
# Partition numbers step by this many in every member, each from its own ordinal: the most
# members a deployment can have.
MAX_MEMBERS = 1024
# rq_new_partition_id (001_queues_and_partitions.sql) scrambles a partition's number by this
# odd factor modulo 2^64; its inverse reads the number back.
_SCRAMBLE = 11400714819323198485
_UNSCRAMBLE = pow(_SCRAMBLE, -1, 1 << 64)
# the text of a numbered id's last eight bytes, all zero
_NUMBERED_TAIL = "0000-000000000000"


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


@dataclass(frozen=True)
class Deployment:
    members: list[Member]  # in ordinal order: members[0] is the catalog
    numbers_from: int  # the first partition number that tells its member
    # databases given that are in no deployment yet, by their own ids: served once
    # `reginamq shards add` adds them
    pending: dict[uuid.UUID, Database] = field(default_factory=dict)


def number_of(partition_id: uuid.UUID) -> int | None:
    """The sequence number partition ``partition_id`` was made from; None for an id made before
    ids carried numbers."""
    raw = partition_id.bytes
    return int.from_bytes(raw[:8], "big") * _UNSCRAMBLE % (1 << 64) if raw[8:] == bytes(8) else None


def home_of(partition_id: uuid.UUID, numbers_from: int) -> int:
    """The ordinal of the member that holds partition ``partition_id``. A partition numbered
    before the deployment was formed, or made before ids carried numbers, is the catalog's:
    only the catalog held partitions then."""
    number = number_of(partition_id)
    return number % MAX_MEMBERS if number is not None and number >= numbers_from else 0


def home_of_text(partition_id: str, numbers_from: int) -> int:
    """:func:`home_of` of an id given as text (as acks and hints name them, again and again),
    read from its canonical form without making a UUID."""
    if len(partition_id) == 36 and partition_id[8] == partition_id[13] == partition_id[18] == "-":
        if partition_id[19:] != _NUMBERED_TAIL:
            return 0  # made before ids carried numbers: the catalog's
        number = int(partition_id[:8] + partition_id[9:13] + partition_id[14:18], 16) * _UNSCRAMBLE % (1 << 64)
        return number % MAX_MEMBERS if number >= numbers_from else 0
    return home_of(uuid.UUID(partition_id), numbers_from)


def place(queue: str, partition: str, members: list[uuid.UUID]) -> int:
    """The ordinal of the member a new partition ``(queue, partition)`` goes to: the highest
    hash of the name with each member's id (rendezvous hashing). Every broker that knows the
    same members places a name alike; a member added later takes its share of new names and
    moves no old one."""
    name = f"{len(queue)}:{queue}/{partition}".encode()
    scores = [hashlib.blake2b(name, digest_size=8, key=member.bytes).digest() for member in members]
    return max(range(len(members)), key=scores.__getitem__)


async def join_up(databases: list[Database], in_doubt_after: float = IN_DOUBT_AFTER) -> Deployment:
    """The deployment ``databases`` make up, with each member's database of ``databases``.
    Forms it when none of ``databases`` belongs to one yet. A forming that a broker left halfway
    is finished once its transactions are ``in_doubt_after`` seconds old."""
    while True:
        states = await _states(databases)
        if all(state.members for state in states):
            return _deployment(databases, states)
        if len(databases) > 1:
            for database in databases:
                if not await Store(database).membership.prepared_transactions_allowed():
                    raise DatabaseUnusable(f"{_named(database)} does not allow prepared transactions, which "
                                           "several member databases need: set max_prepared_transactions "
                                           "(e.g. 64) and restart it")
        async with _forming(databases, states, in_doubt_after) as (settled, forming):
            if not any(state.members for state in settled):
                await _form(forming, settled)
            elif all(state.members for state in settled) or not await forming.waiting():
                return _deployment(databases, settled)
        # a broker that formed them died between its commits: its recovery finishes them
        await asyncio.sleep(1)


def _deployment(databases: list[Database], states: list[MemberState]) -> Deployment:
    """The deployment the members among ``databases`` make up; a database in no deployment
    (``states`` lists no members for it) waits to be added."""
    formed = next(state for state in states if state.members)
    given = [(database, state) for database, state in zip(databases, states, strict=True) if state.members]
    _check_agreement([database for database, _ in given], [state for _, state in given], formed)
    by_id = {state.id: database for database, state in given}
    members = [Member(member_id, ordinal, by_id[member_id]) for ordinal, member_id in enumerate(formed.members)]
    pending = {state.id: database for database, state in zip(databases, states, strict=True) if not state.members}
    return Deployment(members, formed.numbers_from or 0, pending)


@contextlib.asynccontextmanager
async def _forming(databases: list[Database], states: list[MemberState],
                   in_doubt_after: float) -> AsyncIterator[tuple[list[MemberState], TwoPhase]]:
    """The forming lock, held as a session lock on the database of smallest id (the arbiter),
    the states read again under it, and the coordinator that forms. A broker forming commits
    its members one after another, so what is read outside the lock may be halfway through. The
    arbiter records the forming's outcomes, so that every broker given these databases, in
    whatever order, recovers a forming left halfway alike; it does so here, first."""
    order = sorted(range(len(states)), key=lambda index: states[index].id)
    forming = TwoPhase({key: databases[index] for key, index in enumerate(order)}, in_doubt_after,
                       kind=FORMING_TRANSACTIONS)
    async with databases[order[0]].holding() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", FORMING_LOCK_KEY)
        try:
            await forming.recover()
            yield await _states(databases), forming
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", FORMING_LOCK_KEY)


async def _states(databases: list[Database]) -> list[MemberState]:
    states = [await Store(database).membership.state() for database in databases]
    seen: dict[uuid.UUID, Database] = {}
    for database, state in zip(databases, states, strict=True):
        if state.id in seen:
            raise MembershipMismatch(f"{_named(seen[state.id])} and {_named(database)} are the same "
                                     "database; give each member once")
        seen[state.id] = database
    return states


def _check_agreement(databases: list[Database], states: list[MemberState], formed: MemberState) -> None:
    """Every database given is a member, every member is given, and all list the same members."""
    listing = _named(databases[states.index(formed)])
    for database, state in zip(databases, states, strict=True):
        if state.id not in formed.members:
            raise MembershipMismatch(f"{_named(database)} is not a member of the deployment {listing} "
                                     "belongs to; give the databases it was formed with")
        if state.members != formed.members:
            raise MembershipMismatch(f"{_named(database)} and {listing} list different members; they "
                                     "belong to different deployments")
    if len(formed.members) > len(databases):
        raise MembershipMismatch(f"the deployment has {len(formed.members)} member databases and "
                                 f"{len(databases)} were given; give every member to every broker")


async def _form(forming: TwoPhase, states: list[MemberState]) -> None:
    """Writes the list, in the order of ``states``, into every database in one two-phase
    transaction (the caller holds the forming lock). Partition numbers that tell their member
    start past every number any of them gave out. Writes nothing when a database joined another
    deployment meanwhile."""
    ids = [state.id for state in states]
    numbers_from = (max(state.last_number for state in states) // MAX_MEMBERS + 1) * MAX_MEMBERS

    async def write(store: Store) -> None:
        if not await store.membership.form(ids, numbers_from):
            raise _FormedMeanwhile

    with contextlib.suppress(_FormedMeanwhile):
        await forming.run(dict.fromkeys(range(len(states)), write))


def _named(database: Database) -> str:
    return f"database {urlsplit(database.dsn).path.lstrip('/') or '(default)'} on {where(database.dsn)}"


async def check_deployment(urls: list[str], admit_waiting: bool = False) -> list[str]:
    """:func:`join_up` over pools of its own: what ``reginamq serve`` runs once, after the
    schema and before its workers start. Returns ``urls`` in the members' ordinal order, the
    order in which the workers are given them, then the databases waiting to be added. With
    ``admit_waiting`` (``serve --shards N`` given more embedded servers than its deployment
    has: no other broker can reach them) the waiting databases are added first, in order."""
    databases = [Database(url, 2) for url in urls]
    try:
        for database in databases:
            await database.open()
        deployment = await join_up(databases)
        waiting = list(deployment.pending.values())
        serving = [member.database for member in deployment.members]
        if admit_waiting:
            for database in waiting:
                member = await admit(serving, database)
                log.warning("%s joined the deployment as member %d", _named(database), member.ordinal)
                serving.append(database)
            waiting = []
        for database in waiting:
            log.warning("%s is in no deployment yet: it is served once `reginamq shards add` adds it",
                        _named(database))
        return [database.dsn for database in serving + waiting]
    finally:
        for database in databases:
            await database.close()


async def admit(databases: list[Database], new: Database) -> Member:
    """Adds ``new``, a database holding reginamq's schema and no queue, to the deployment whose
    members ``databases`` are (docs/shards.md, "Adding a member"). In one two-phase transaction
    it copies what every member holds from the catalog into ``new`` and lists ``new`` in every
    member under the next ordinal; the catalog's members' rows stay locked meanwhile, so no
    queue is created, configured or deleted on the members without ``new``. Nothing that
    exists moves. Answers the new member."""
    deployment = await join_up(databases)
    if len(deployment.members) != len(databases):
        raise MembershipMismatch("give every member of the deployment with --database-url, and the database to "
                                 "add once")
    membership = Store(new).membership
    state = await membership.state()
    if state.members:
        raise MembershipMismatch(f"{_named(new)} is a member of a deployment already")
    if await membership.holds_queues():
        raise MembershipMismatch(f"{_named(new)} holds queues; a database to add must hold none")
    if not await membership.prepared_transactions_allowed():
        raise DatabaseUnusable(f"{_named(new)} does not allow prepared transactions: set "
                               "max_prepared_transactions (e.g. 64) and restart it")
    ordinal = len(deployment.members)
    ids = [member.id for member in deployment.members] + [state.id]
    adding = TwoPhase({**{member.ordinal: member.database for member in deployment.members}, ordinal: new})
    await adding.recover()  # an add that was killed halfway holds rows of the new database

    async def add(joined: Joined) -> None:
        replicated = await (await joined.store(0)).membership.replicated()
        for member in deployment.members:
            await (await joined.store(member.ordinal)).membership.admit(state.id, ordinal)
        added = (await joined.store(ordinal)).membership
        if not await added.form(ids, deployment.numbers_from):
            raise MembershipMismatch(f"{_named(new)} joined a deployment meanwhile")
        await added.take_replicated(replicated)

    await adding.atomically(add)
    return Member(state.id, ordinal, new)
