"""The store of a deployment of several member databases: the families of
:class:`~reginamq.store.Store`, each routed to the members that hold what it names
(docs/shards.md, "Routes over members").

- ``messages``: by partition home (:mod:`.sharded_messages`);
- ``consumer_groups``: merged over every member, changes made on every member
  (:mod:`.sharded_consumer_groups`);
- ``queues``: a configure or delete is written on every member, in one unit of
  :meth:`ShardedStore.atomically`, so every member holds the same queues and options or the
  change is nowhere; it is read and announced on the catalog;
- ``resources``, ``statistics``, ``dead_letters``, ``message_admin``, ``traces`` and ``reads``:
  a call naming a partition goes to its home; one over a queue or everything asks every member
  and merges the answers into what one database holding all their rows would answer
  (:mod:`.sharded_resources`, :mod:`.sharded_statistics`, :mod:`.sharded_dead_letters`,
  :mod:`.sharded_message_admin`, :mod:`.sharded_traces`, :mod:`.sharded_reads`);
- ``notices``: heard from every member, a sync sent on every member (:mod:`.sharded_notices`);
- ``queue_settings``: read from the catalog's pool (every member holds the same);
- ``streams``: the state of a source partition on its home, the queries on every member
  (:mod:`.sharded_streams`);
- the catalog's families: ``kv``, ``locks``, ``timers``, ``ephemeral``,
  ``process_metrics``, ``membership``, ``directory`` and ``leadership`` (of the loops that run
  once for the whole deployment).

:meth:`ShardedStore.atomically` runs a unit as a two-phase transaction over the members it
uses (store/two_phase.py): a unit that touched one member commits as on one database.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.homes import Homes
from reginamq.store.members import Deployment, Member, MembershipMismatch, join_up
from reginamq.store.routing import Members, OnMember, Pooled
from reginamq.store.sharded_consumer_groups import ShardedConsumerGroups
from reginamq.store.sharded_dead_letters import ShardedDeadLetters
from reginamq.store.sharded_message_admin import ShardedMessageAdmin
from reginamq.store.sharded_messages import ShardedMessages
from reginamq.store.sharded_notices import ShardedNotices
from reginamq.store.sharded_reads import ShardedReads
from reginamq.store.sharded_resources import ShardedResources
from reginamq.store.sharded_statistics import ShardedStatistics
from reginamq.store.sharded_streams import ShardedStreams
from reginamq.store.sharded_traces import ShardedTraces
from reginamq.store.two_phase import Joined

T = TypeVar("T")
log = logging.getLogger("reginamq.store")
CATALOG_FAMILIES = ("kv", "locks", "timers", "ephemeral", "process_metrics", "membership", "directory", "leadership")


class ShardedQueues:
    """The ``queues`` family on every member (see the module header)."""

    def __init__(self, members: Members, homes: Homes):
        self._members = members
        self._homes = homes

    async def _every(self, call: Callable[[Store], Awaitable[T]]) -> list[T]:
        """``call`` on every member, one after another in ordinal order (the lock order), once
        the catalog holds off any member's addition (Homes.hold_members)."""
        await self._homes.hold_members(await self._members.store(0))
        return [await call(await self._members.store(ordinal)) for ordinal in range(len(self._homes.stores))]

    async def lock(self, queue: str):
        """Locks the name and row on every member; answers the catalog's row."""
        return (await self._every(lambda store: store.queues.lock(queue)))[0]

    async def upsert(self, queue: str, namespace: str | None, task: str | None, options: str) -> int:
        """Writes the queue on every member, with the catalog's id of it; answers that id."""
        await self._homes.hold_members(await self._members.store(0))
        queue_id = await (await self._members.store(0)).queues.upsert(queue, namespace, task, options)
        for ordinal in range(1, len(self._homes.stores)):
            await (await self._members.store(ordinal)).queues.upsert(queue, namespace, task, options, queue_id)
        return queue_id

    async def delete(self, queue: str) -> bool:
        """Deletes the queue on every member and unlists its partitions."""
        deleted = await self._every(lambda store: store.queues.delete(queue))
        await (await self._members.store(0)).directory.forget(queue)
        self._homes.forget_queue(queue)
        return any(deleted)

    async def announce(self, queue: str) -> None:
        await (await self._members.store(0)).queues.announce(queue)

    async def options(self, queue: str) -> str | None:
        return await (await self._members.store(0)).queues.options(queue)


class ShardedStore:
    """The families over ``databases``, the members in ordinal order, each call on the members'
    pools (inside :meth:`atomically`, on the unit's transactions); usable once :meth:`join`
    checked the deployment they make up."""

    def __init__(self, databases: list[Database], homes: Homes | None = None, members: Members | None = None):
        self._databases = databases
        self._waiting: dict[uuid.UUID, Database] = {}  # given, not yet members, by their ids
        self._unserved: set[uuid.UUID] = set()  # members added whose database was not given (logged once)
        self.homes = homes or Homes(databases)
        self._members = members or Pooled(self.homes.stores)
        self.consumer_groups = ShardedConsumerGroups(self.homes.stores)
        self.notices = ShardedNotices(self.homes.stores, self._members)
        self.messages = ShardedMessages(self.homes, self._members, self.consumer_groups)
        self.queues = ShardedQueues(self._members, self.homes)
        self.resources = ShardedResources(self.homes, self._members)
        self.statistics = ShardedStatistics(self.homes, self._members)
        self.dead_letters = ShardedDeadLetters(self.homes, self._members)
        self.message_admin = ShardedMessageAdmin(self.homes, self._members)
        self.traces = ShardedTraces(self.homes, self._members)
        self.reads = ShardedReads(self.homes, self._members)
        self.streams = ShardedStreams(self.homes, self._members)
        # read only, the same on every member: on the catalog's pool even inside a unit, which
        # therefore joins no member for it
        self.queue_settings = self.homes.stores[0].queue_settings
        for family in CATALOG_FAMILIES:
            setattr(self, family, getattr(self.homes.stores[0], family) if isinstance(self._members, Pooled)
                    else OnMember(self._members, 0, family))

    def member_stores(self) -> list[Store]:
        """The store of each member database, on its pool, in ordinal order."""
        return self.homes.stores

    async def join(self, deployment: Deployment | None = None) -> Deployment:
        """Checks that the databases are the deployment's members in ordinal order (forming it
        if they are all new), unless ``deployment`` tells it; the store is usable from then on.
        Databases given after the members wait to be added (:meth:`grow`)."""
        if deployment is None:
            deployment = await join_up(self._databases)
            given = [member.database for member in deployment.members]
            if given != self._databases[:len(given)]:
                raise MembershipMismatch("the member databases were given out of their order; give them as "
                                         "`reginamq serve` lists them")
        self._waiting = dict(deployment.pending)
        self.homes.join(deployment)
        self.messages.serve(self.homes.stores)
        return deployment

    async def grow(self) -> list[Store]:
        """Serves the members added to the deployment since this process last looked, each
        from the databases it was given that waited to be added (docs/shards.md, "Adding a
        member"); answers their stores. A member added whose database this process was not
        given is not served: its partitions are out of reach here (pushes to them spooled) and
        it is logged once."""
        listed = (await self.homes.stores[0].membership.state()).members
        added: list[Store] = []
        while len(self.homes.stores) < len(listed):
            member_id = listed[len(self.homes.stores)]
            database = self._waiting.pop(member_id, None)
            if database is None:
                if member_id not in self._unserved:
                    self._unserved.add(member_id)
                    log.error("member database %s (ordinal %d) was added to the deployment but this broker "
                              "was not given its URL: give every broker every member's URL", member_id,
                              len(self.homes.stores))
                break
            self.homes.admit(Member(member_id, len(self.homes.stores), database))
            added.append(self.homes.stores[-1])
        if added:
            self.messages.serve(self.homes.stores)
        return added

    async def recover_transactions(self) -> int:
        """Finishes what a coordinator left prepared on the members (TwoPhase.recover); answers
        how many transactions it finished."""
        return await self.homes.coordinator.recover()

    async def atomically(self, work: Callable[[ShardedStore], Awaitable[T]]) -> T:
        """``work`` with a store whose every call runs in one transaction over the members it
        uses: all of them commit when ``work`` returns, or none does (store/two_phase.py)."""
        if isinstance(self._members, Joined):
            return await work(self)
        return await self.homes.coordinator.atomically(
            lambda joined: work(ShardedStore(self._databases, self.homes, joined)))
