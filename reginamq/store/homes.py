"""Where each partition of a deployment of several member databases lives, as one broker
process knows it (docs/shards.md, "Placement and the directory").

A partition id tells its home by itself (:func:`~reginamq.store.members.home_of`). A name's home
(the member its listed id tells) is read from the directory on the catalog once and kept. A push
naming a name this process does not keep claims it at once, which answers the listed id of a
name listed already; a name the directory does not list yet is so given a home and an id before
anything is written under it:

1. it is placed (:func:`~reginamq.store.members.place`) and given an id of its home's numbers,
   which the process takes from the home in blocks;
2. the id is claimed in the directory: the first claim of a name wins, so brokers that raced
   for it, even holding different member lists, agree on one id and therefore one home;
3. the push that named it creates the partition on its home with the listed id (whoever's
   claim won), in the push's own statement: no call and no commit of its own. A claimant that
   died, or whose push failed, before that leaves the name listed and not created; whoever
   names it next creates it, as below.

A queue named for the first time is created on every member that lacks it, in one two-phase
transaction, so that all members hold the same queues or none does, each with the id the
catalog gave it.

If a partition listed here is later deleted on its home (the idle cleanup), or was never
created there, a push creates it again: with the listed id when its process claims the name,
otherwise of the home's own numbers, an id that differs from the listed one but tells the same
home, which is all the listing is used for.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Iterable
from datetime import datetime
from typing import TypeVar

from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import Deployment, Member, home_of, home_of_text, place
from reginamq.store.two_phase import Joined, TwoPhase

Name = tuple[str, str]
T = TypeVar("T")
# Names whose member a process keeps; past this the oldest are forgotten until a tenth of it is
# free (and read again from the directory when next named).
KEPT_NAMES = 1_000_000
# Ids a process takes from a member at once, past what a placement needs, for the new names it
# will place there: a new name then usually costs its home no call before its claim. Ids never
# given out are skipped numbers, of which every member has 2^54.
MINTED_AT_ONCE = 256


class MembersChanged(Unavailable):
    """A member was added that this process does not serve yet: nothing was written."""


class Homes:
    """Over ``databases``, the members in ordinal order; usable once :meth:`join` was told the
    deployment they make up."""

    def __init__(self, databases: list[Database]):
        self.stores = [Store(database) for database in databases]
        self.coordinator = TwoPhase(dict(enumerate(databases)))
        self._numbers_from = 0
        self._member_ids: list[uuid.UUID] = []
        # queue → partition name → the member its listed id tells: the id is only ever read for
        # its home, and one dict a queue makes a name cost its partition string and one entry
        self._listed: dict[str, dict[str, int]] = {}
        self._listed_count = 0
        self._queues: set[str] = set()  # known to exist on every member
        self._moved_seen: dict[int, datetime] = {}  # by member: the latest move forgotten
        self._minted: dict[int, list[uuid.UUID]] = defaultdict(list)  # by member: its ids not given yet

    def join(self, deployment: Deployment) -> None:
        """Serves the deployment's members, the first databases given in ordinal order; the
        others wait to be added (:meth:`admit`). The coordinator's recovery looks at those too:
        an add that was killed halfway left its part prepared there."""
        self._numbers_from = deployment.numbers_from
        self._member_ids = [member.id for member in deployment.members]
        del self.stores[len(deployment.members):]

    def admit(self, member: Member) -> None:
        """``member`` was added to the deployment (the next ordinal): its share of new names is
        placed on it from now on."""
        self.stores.append(Store(member.database))
        self._member_ids.append(member.id)
        self.coordinator.admit(member.ordinal, member.database)

    async def hold_members(self, catalog: Store) -> None:
        """In a unit that writes what every member holds, on ``catalog`` (its store in the unit):
        no member is added until the unit ends, and none was added that this process does not
        serve yet; otherwise raises :class:`MembersChanged`."""
        count = await catalog.membership.held()
        if count != len(self.stores):
            raise MembersChanged(f"the deployment has {count} member databases and this broker serves "
                                 f"{len(self.stores)}; it serves the new one within seconds if it was given its URL")

    def of_id(self, partition_id: str | uuid.UUID) -> int:
        """The ordinal of the member holding partition ``partition_id``."""
        if isinstance(partition_id, uuid.UUID):
            return self._served(home_of(partition_id, self._numbers_from))
        return self._served(home_of_text(partition_id, self._numbers_from))

    def _served(self, home: int) -> int:
        """``home``, or the catalog for a member this process does not serve (yet): an id whose
        number names no member is a partition no member holds, and the catalog is asked."""
        return home if home < len(self.stores) else 0

    async def of_name(self, queue: str, partition: str) -> int:
        """The ordinal of the member that holds, or will hold, partition ``partition`` of
        ``queue``: its listed home, or where it would be placed."""
        listed = await self.listed([(queue, partition)])
        if listed:
            return listed[queue, partition]
        return place(queue, partition, self._member_ids)

    async def listed(self, names: list[Name]) -> dict[Name, int]:
        """The member holding each of ``names`` that the directory lists (the home its listed id
        tells). While the catalog is out of reach, the member of each that another member holds;
        raises :class:`Unavailable` if one of ``names`` is held by none of them (the catalog may
        hold it, or list it)."""
        found = {name: self._kept(name) for name in names}
        missing = [name for name, home in found.items() if home is None]
        if missing:
            try:
                self._keep(await self.stores[0].directory.lookup(missing))
            except Unavailable:
                held = await self._held_elsewhere(missing)
                self._keep(held)
                if len(held) < len(missing):
                    raise
            found.update((name, self._kept(name)) for name in missing)
        return {name: home for name, home in found.items() if home is not None}

    def _kept(self, name: Name) -> int | None:
        partitions = self._listed.get(name[0])
        home = None if partitions is None else partitions.get(name[1])
        return None if home is None else self._served(home)

    async def _held_elsewhere(self, names: list[Name]) -> dict[Name, uuid.UUID]:
        """The id of each of ``names`` that a member other than the catalog holds, asked of every
        one it reaches: a partition lives on one member only, and its id tells which."""
        queues, partitions = [queue for queue, _ in names], [partition for _, partition in names]
        answers = await _reached(store.messages.partition_ids(queues, partitions) for store in self.stores[1:])
        return {names[position - 1]: uuid.UUID(partition_id)
                for answer in answers.values() for position, partition_id in answer}

    async def provide(self, names: list[Name], new_queue_options: str) -> tuple[list[int], dict[Name, uuid.UUID]]:
        """The home of each of ``names``, in order; and the listed id of each name this process
        did not keep, for the push to create the partition with where it does not exist yet.

        A name not kept is claimed at once (its new queue created first, with
        ``new_queue_options``, JSON, on every member): the claim lists a new name and answers the
        listed id of one listed already, so a new partition costs the catalog one call, not a
        look-up and then a claim. When that cannot be done (the catalog or a member out of
        reach, a member added meanwhile), the names listed or held elsewhere are found as
        :meth:`listed` finds them, and a name left without a home raises the error."""
        found = {name: self._kept(name) for name in names}
        missing = [name for name, home in found.items() if home is None]
        fresh: dict[Name, uuid.UUID] = {}
        if missing:
            try:
                await self._create_queues(sorted({queue for queue, _ in missing}), new_queue_options)
                fresh = await self._list(missing)
            except Unavailable:
                found.update(await self.listed(missing))
                if any(home is None for home in found.values()):
                    raise
            else:
                found.update((name, self.of_id(partition_id)) for name, partition_id in fresh.items())
        return [found[name] for name in names], fresh

    def forget_names(self, names: list[Name]) -> None:
        """What is kept of ``names`` is stale (they moved to another member)."""
        for queue, partition in names:
            partitions = self._listed.get(queue)
            if partitions is not None and partitions.pop(partition, None) is not None:
                self._listed_count -= 1

    async def forget_moved(self) -> int:
        """Forgets the names that moved away from a member (store/rebalance.py) since this
        process last looked; answers how many. A member out of reach is looked at next time."""
        answers = await _reached(store.moves.moved_since(self._moved_seen.get(ordinal))
                                 for ordinal, store in enumerate(self.stores))
        for ordinal, moved in answers.items():
            if moved:
                self.forget_names([(row["queue"], row["partition"]) for row in moved])
                self._moved_seen[ordinal] = moved[-1]["moved_at"]
        return sum(len(moved) for moved in answers.values())

    def forget_queue(self, queue: str) -> None:
        """``queue`` was deleted: what is kept of it is stale."""
        self._queues.discard(queue)
        self._listed_count -= len(self._listed.pop(queue, {}))

    async def _create_queues(self, queues: list[str], options: str) -> None:
        unknown = [queue for queue in queues if queue not in self._queues]
        if not unknown:
            return
        existing = await asyncio.gather(*(store.provisioning.existing_queues(unknown) for store in self.stores))
        if any(len(found) < len(unknown) for found in existing):
            async def create(joined: Joined) -> None:
                await self.hold_members(await joined.store(0))
                catalog = (await joined.store(0)).provisioning
                await catalog.create_queues(unknown, options)
                ids = await catalog.existing_queues(unknown)
                for ordinal in range(1, len(self.stores)):
                    await (await joined.store(ordinal)).provisioning.create_queues(list(ids), options,
                                                                                   list(ids.values()))

            await self.coordinator.atomically(create)
        self._queues.update(unknown)

    async def _list(self, new: list[Name]) -> dict[Name, uuid.UUID]:
        """Places ``new`` names and claims them in the directory: the id each is listed under."""
        placed: dict[int, list[Name]] = defaultdict(list)
        for name in new:
            placed[place(*name, self._member_ids)].append(name)
        minted = await asyncio.gather(*(self._ids_of(home, len(names)) for home, names in placed.items()))
        proposed = {name: partition_id for names, ids in zip(placed.values(), minted, strict=True)
                    for name, partition_id in zip(names, ids, strict=True)}
        listed = await self.stores[0].directory.claim(proposed)
        self._keep(listed)
        return listed

    async def _ids_of(self, home: int, count: int) -> list[uuid.UUID]:
        """``count`` fresh partition ids of member ``home``'s numbers, from the ones this process
        keeps, minted there :data:`MINTED_AT_ONCE` more at a time than it lacks."""
        kept = self._minted[home]
        while len(kept) < count:
            kept.extend(await self.stores[home].provisioning.mint(count - len(kept) + MINTED_AT_ONCE))
        taken = kept[:count]
        del kept[:count]
        return taken

    def _keep(self, listed: dict[Name, uuid.UUID]) -> None:
        for (queue, partition), partition_id in listed.items():
            partitions = self._listed.setdefault(queue, {})
            self._listed_count += partition not in partitions
            partitions[partition] = home_of(partition_id, self._numbers_from)
        if self._listed_count > KEPT_NAMES:  # room again for a tenth of the bound
            self._forget_oldest(self._listed_count - KEPT_NAMES + KEPT_NAMES // 10)

    def _forget_oldest(self, count: int) -> None:
        """Forgets ``count`` kept names: of the queue first kept first, its oldest names first."""
        for queue in list(self._listed):
            partitions = self._listed[queue]
            dropped = list(itertools.islice(partitions, count))
            for partition in dropped:
                del partitions[partition]
            if not partitions:
                del self._listed[queue]
            self._listed_count -= len(dropped)
            count -= len(dropped)
            if not count:
                return


async def _reached(calls: Iterable[Awaitable[T]]) -> dict[int, T]:
    """The answers of ``calls``, run concurrently, by position, of the ones whose member could be
    reached; any other failure is raised."""
    answers = await asyncio.gather(*calls, return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, Unavailable):
            raise answer
    return {position: answer for position, answer in enumerate(answers) if not isinstance(answer, Unavailable)}
