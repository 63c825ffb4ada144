"""The ``messages`` family over the members of a deployment of several databases: the same
calls and answers as :class:`~reginamq.store.messages.Messages`, each routed to the members
that hold the partitions it names (docs/shards.md, "Routes over members").

- **Push**: items grouped by home (:class:`~reginamq.store.homes.Homes` lists and creates new
  names first), one push per member, concurrently. Each member's part is all or nothing, as a
  push on one database is; the request is not atomic over members. When a member fails (down,
  or a queue full there), what the others wrote stays written and the call raises that
  member's failure: the push is answered as refused or spooled whole, and sending it again is
  safe because the written items are deduplicated by their transactionId. A member that
  refuses a part because a rebalance moved one of its partitions away (``PartitionMoved``) has
  written nothing: the part's names are looked up again and it is pushed where they are now.
- **A named group's first pop of a queue** in this process subscribes it on every member, as
  the catalog holds it (:meth:`ShardedConsumerGroups.subscribe_everywhere`); a namespace/task
  pop does so for each queue it selects, before it asks any member, so that members the pop
  does not ask still start the group where the others do.
- **Pop of one partition**: its home. **Wildcard and namespace/task pops** ask a member only
  when the pop has something to look at there, as the engine asks one database only then
  (engine/pop.py): hints of its partitions, a look-up of the recent writes, a backlog sweep,
  or the group's policy while no member has told it yet. A member with work and no hints is
  therefore reached by the engine's look-ups and sweeps, as on one database. When the pop
  holds hints of partitions on several members and looks at nothing else (no look-up, no
  sweep), and has room for a message and a partition on each, those members are asked
  together, the room (messages and partitions) split in proportion to the hints each holds:
  one round trip instead of one a member. A hint names a partition with new messages, so the
  shares follow where the work is; a member that fills its share hands back the hints it did
  not check, and the engine wakes the group's next poller for them (engine/pop.py), as it
  does after a full pop. A look-up or a sweep has no such measure of where the work is (an
  even split would cut a single busy partition's batch to a fraction), so such pops, and
  pops of one message or one partition, ask the members in turn: the home of the oldest hint
  first, then the one with the most hints, each for what the pop still has room for, until it
  is full or every member was asked. One lease may hold partitions on several members. A
  member that cannot be reached is passed over (its hints are handed back); the pop fails
  only when it asked every member and none answered. Each member's backlog sweep keeps its
  own position here (a sweep walks that member's partitions), so the position the engine
  passes back is not used.
- **Ack**: grouped by the home each partition id tells, one ack per member, concurrently.
- **Notices** of a push or an ack over several members go out once, on one of them
  (:meth:`ShardedMessages._written`): every process listens on every member.
- **Lease renewal and the lease look-ups**: a lease id does not tell its members, so these ask
  every member and put the answers together.

Calls that write go through ``members``: each member's pool, or inside a unit of
:meth:`ShardedStore.atomically <reginamq.store.sharded.ShardedStore.atomically>` that member's
transaction, joined when first used. Lease look-ups and renewals always use the pools, so that
a transaction joins only the members its writes touch. A new name is listed and created on
its home outside any transaction (see homes.py): a transaction rolled back leaves at most an
empty partition.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.consumer_groups import QUEUE_MODE
from reginamq.store.homes import Homes
from reginamq.store.merging import everywhere, settled
from reginamq.store.messages import Messages, PartitionMoved
from reginamq.store.routing import Members, Pooled
from reginamq.store.sharded_consumer_groups import ShardedConsumerGroups

Row = Sequence[Any]
# Columns of a pop's rows (Messages.pop)
_PARTITION_ID, _PAYLOADS, _SWEEP_QUEUE, _SWEPT, _HINTS_LEFT, _CONFLATING = 1, 5, 6, 8, 9, 11
# the notice column of a push's and an ack's rows (Messages.push, Messages.ack)
_PUSH_NOTICE, _ACK_NOTICE = 2, 6
MAX_KNOWN_READERS = 100_000  # readers whose turn among the members is kept (see _order)


class ShardedMessages:
    def __init__(self, homes: Homes, members: Members, groups: ShardedConsumerGroups):
        self._homes = homes
        self._members = members
        self._groups = groups
        self._subscribed: set[tuple[str, str]] = set()  # (queue, group) subscribed on every member
        self._pooled: list[Messages] = [store.messages for store in homes.stores]
        # (queue, namespace, task, group, member) → (sweep_queue, sweep_name) where its sweep stopped
        self._sweeps: dict[tuple, tuple[int | None, str | None]] = {}
        self._announcing: Callable[[list[str]], list[str]] | None = None
        self._turns: dict[tuple, int] = {}  # reader → its wildcard pops so far (see _order)

    def announce_through(self, hook: Callable[[list[str]], list[str]]) -> None:
        self._announcing = hook
        for member in self._pooled:
            member.announce_through(hook)

    def serve(self, stores: list[Store]) -> None:
        """Serves the members' ``stores``, in ordinal order: the same, or more once one was added
        (whose subscriptions each group's next pop then copies to it)."""
        self._pooled[:] = [store.messages for store in stores]
        self._subscribed.clear()
        if self._announcing is not None:
            self.announce_through(self._announcing)

    async def push(self, queues: list[str], partitions: list[str], pairs: list[int], txids: list[str],
                   message_ids: list[str], fragments: list[bytes], new_queue_options: str,
                   enforce_max_size: bool, *, looked_again: bool = False) -> list[Row]:
        homes, listed = await self._homes.provide(list(zip(queues, partitions, strict=True)), new_queue_options)
        arguments = (txids, message_ids, fragments, new_queue_options, enforce_max_size)
        if len(set(homes)) == 1:  # one member holds every pair: the push goes there as it came
            return await self._push_on(homes[0], queues, partitions, pairs, arguments, True, looked_again, listed)
        items: dict[int, list[int]] = defaultdict(list)
        for item, pair in enumerate(pairs):
            items[homes[pair - 1]].append(item)

        async def push_to(home: int, mine: list[int], announce: bool) -> list[Row]:
            local: dict[int, int] = {}  # the push's pair → the member's pair, both 1-based
            local_pairs = [local.setdefault(pairs[item], len(local) + 1) for item in mine]
            local_queues = [queues[pair - 1] for pair in local]
            local_partitions = [partitions[pair - 1] for pair in local]
            part = ([txids[item] for item in mine], [message_ids[item] for item in mine],
                    [fragments[item] for item in mine], new_queue_options, enforce_max_size)
            rows = await self._push_on(home, local_queues, local_partitions, local_pairs, part, announce, looked_again,
                                       listed)
            return [(None if row[0] is None else mine[row[0]], row[1], row[2]) for row in rows]

        return await self._written({home: functools.partial(push_to, home, mine) for home, mine in items.items()},
                                   _PUSH_NOTICE)

    async def _push_on(self, home: int, queues: list[str], partitions: list[str], pairs: list[int], arguments: tuple,
                       announce: bool, looked_again: bool, listed: dict[tuple[str, str], uuid.UUID]) -> list[Row]:
        """The part of a push that ``home`` holds (``arguments``: its txids, message ids,
        fragments, new queue options and whether maxSize is enforced); the partitions of names
        ``listed`` for this push are created there with their listed ids."""
        listed_ids = ([None if (listed_id := listed.get(pair)) is None else str(listed_id)
                       for pair in zip(queues, partitions, strict=True)] if listed else None)
        try:
            return await (await self._members.store(home)).messages.push(queues, partitions, pairs, *arguments,
                                                                          announce, listed_ids)
        except PartitionMoved:
            # a rebalance moved a partition of this part since its name was looked up
            self._homes.forget_names(list(zip(queues, partitions, strict=True)))
            if looked_again or not isinstance(self._members, Pooled):
                raise  # inside a transaction, which the refusal aborted: the client's retry looks again
            return await self.push(queues, partitions, pairs, *arguments, looked_again=True)

    async def pop(self, queue: str | None, partition: str | None, namespace: str | None, task: str | None,
                  group: str, batch: int, partitions: int, auto_ack: bool, lease_seconds: int, lease_id: str,
                  subscription_mode: str, subscription_from: datetime | None, sweep_queue: int | None,
                  sweep_name: str | None, may_sweep: bool, hints: list[str], since: datetime | None, scan: bool,
                  conflation: bool | None, report: bool) -> list[Row]:
        """As :meth:`Messages.pop`, over the members in turn (see the header)."""
        def pop_on(home: int, member_hints: list[str], sweep_from: tuple, room: int, partitions_left: int,
                   asks_policy: bool = report) -> Awaitable[list[Row]]:
            return self._pooled[home].pop(queue, partition, namespace, task, group, room, partitions_left,
                                           auto_ack, lease_seconds, lease_id, subscription_mode, subscription_from,
                                           *sweep_from, may_sweep, member_hints, since, scan, conflation,
                                           asks_policy)

        if group != QUEUE_MODE and (queue is None or (queue, group) not in self._subscribed):
            await self._subscribe_everywhere(queue, namespace, task, group, subscription_mode, subscription_from,
                                             conflation)
        if queue is not None and partition is not None:
            return await pop_on(await self._homes.of_name(queue, partition), hints, (sweep_queue, sweep_name),
                                batch, partitions)
        hinted: dict[int, list[str]] = defaultdict(list)
        for hint in hints:
            hinted[self._homes.of_id(hint)].append(hint)
        reader = (queue, namespace, task, group)
        if len(self._turns) >= MAX_KNOWN_READERS:  # bounded: a reader forgotten starts its turns again
            self._turns.clear()
        turn = self._turns[reader] = self._turns.get(reader, -1) + 1
        order = _order(self._homes.of_id(hints[0]) if hints else None, hinted, len(self._pooled), turn, scan)
        delivered = _Gathered(batch, partitions)
        asked = [home for home in order if hinted[home]]
        if not (scan or may_sweep) and 1 < len(asked) <= min(batch, partitions):
            # hints on several members, room for each: asked together, the room split
            weights = [len(hinted[home]) for home in asked]
            answers = await asyncio.gather(
                *(pop_on(home, hinted[home], self._sweeps.get((*reader, home), (None, None)), room, share)
                  for home, room, share in zip(asked, _shares(batch, weights), _shares(partitions, weights),
                                               strict=True)),
                return_exceptions=True)
            failures = [answer for answer in answers if isinstance(answer, BaseException)]
            if any(not isinstance(failure, Unavailable) for failure in failures):
                raise next(failure for failure in failures if not isinstance(failure, Unavailable))
            if len(failures) == len(order):
                raise failures[0]  # every member was asked and none answered
            for home, answer in zip(asked, answers, strict=True):
                if isinstance(answer, BaseException):
                    delivered.unreached(hinted[home])
                else:
                    self._take(delivered, reader, home, answer)
            delivered.hints_left += _unasked(hinted, [home for home in order if home not in asked])
            return delivered.answer(len(order))
        unreachable = 0
        for position, home in enumerate(order):
            if delivered.full:
                delivered.hints_left += _unasked(hinted, order[position:])
                break
            asks_policy = report and not delivered.policy_told
            if not (hinted[home] or scan or may_sweep or asks_policy):
                continue  # nothing to look at there (see the header)
            try:
                rows = await pop_on(home, hinted[home], self._sweeps.get((*reader, home), (None, None)),
                                    delivered.room, delivered.partitions_left, asks_policy)
            except Unavailable:
                if delivered.empty and position == len(order) - 1 and unreachable == position:
                    raise  # every member was asked and none answered
                unreachable += 1
                delivered.unreached(hinted[home])
                continue
            self._take(delivered, reader, home, rows)
        return delivered.answer(len(order))

    def _take(self, gathered: _Gathered, reader: tuple, home: int, rows: list[Row]) -> None:
        """Takes one member's answer to a pop into ``gathered``, and keeps where that member's
        sweep for the reader stopped."""
        last = rows[-1] if rows else None
        if last is not None and last[_SWEPT] is not None:
            self._sweeps[(*reader, home)] = (last[_SWEEP_QUEUE], last[_SWEEP_QUEUE + 1])
        gathered.take(rows)

    async def _subscribe_everywhere(self, queue: str | None, namespace: str | None, task: str | None, group: str,
                                    mode: str, start: datetime | None, conflation: bool | None) -> None:
        """Subscribes ``group`` on every member, as the catalog holds it, to the queue a pop
        names or to each queue its namespace/task selection reads (listed on every such pop:
        a queue may join the selection), unless this process did already."""
        provisioning = self._homes.stores[0].provisioning
        if queue is not None:
            ids = await provisioning.existing_queues([queue])
        else:
            ids = await provisioning.selected_queues(namespace, task)
        for name, queue_id in ids.items():
            if (name, group) not in self._subscribed:
                await self._groups.subscribe_everywhere(queue_id, group, mode, start, conflation)
                self._subscribed.add((name, group))

    async def pop_ready(self, queue: str, partition: str | None, group: str, partitions: int, batch: int) -> int:
        if partition is not None:
            home = await self._homes.of_name(queue, partition)
            return await self._pooled[home].pop_ready(queue, partition, group, partitions, batch)
        counts = await asyncio.gather(*(member.pop_ready(queue, partition, group, partitions, batch)
                                        for member in self._pooled))
        return min(batch, max(counts))

    async def ack(self, groups: list[str], partitions: list[str], txids: list[str], leases: list[str | None],
                  statuses: list[str], errors: list[str | None]) -> list[Row]:
        homes = {partition: self._homes.of_id(partition) for partition in set(partitions)}  # a batch's repeat
        items: dict[int, list[int]] = defaultdict(list)
        for item, partition in enumerate(partitions):
            items[homes[partition]].append(item)
        if len(items) == 1:  # one member holds every partition: the ack goes there as it came
            store = await self._members.store(next(iter(items)))
            return await store.messages.ack(groups, partitions, txids, leases, statuses, errors)

        async def ack_on(home: int, mine: list[int], announce: bool) -> list[Row]:
            rows = await (await self._members.store(home)).messages.ack(
                [groups[item] for item in mine], [partitions[item] for item in mine],
                [txids[item] for item in mine], [leases[item] for item in mine],
                [statuses[item] for item in mine], [errors[item] for item in mine], announce)
            return [(mine[row[0]], *row[1:]) if row[0] is not None else tuple(row) for row in rows]

        return await self._written({home: functools.partial(ack_on, home, mine) for home, mine in items.items()},
                                   _ACK_NOTICE)

    async def _written(self, calls: dict[int, Callable[[bool], Awaitable[list[Row]]]], notice: int) -> list[Row]:
        """Each ``calls[home](announce)`` concurrently, their rows put together; when one fails,
        the others finish and the first failure is raised. On the pools, a write over several
        members announces its notices (column ``notice`` of the rows without an item) once, on
        the lowest member that answered, instead of once a member: every process hears every
        member, and the notification goes out before the call answers, so a sync sent after it
        hears it as it would hear a member's own. Inside a unit, each member's notices go out
        once its transaction committed."""
        each = len(calls) == 1 or not isinstance(self._members, Pooled)
        answers = await asyncio.gather(*(call(each) for call in calls.values()), return_exceptions=True)
        answered = [home for home, answer in zip(calls, answers, strict=True) if not isinstance(answer, BaseException)]
        if not each and answered:
            await self._pooled[answered[0]].announce(
                [row[notice] for answer in answers if not isinstance(answer, BaseException)
                 for row in answer if row[0] is None and row[notice] is not None])
        return _joined(settled(answers))

    async def extend_lease(self, lease_id: str, seconds: int) -> Row:
        answers = await asyncio.gather(*(member.extend_lease(lease_id, seconds) for member in self._pooled))
        renewed = [answer for answer in answers if answer[0]]
        if not renewed:
            return answers[0]
        return sum(answer[0] for answer in renewed), max(answer[1] for answer in renewed)

    async def expire_lease(self, lease_id: str) -> int:
        return sum(await asyncio.gather(*(member.expire_lease(lease_id) for member in self._pooled)))

    async def live_leases(self, lease_ids: list[str]) -> set[str]:
        found = await asyncio.gather(*(member.live_leases(lease_ids) for member in self._pooled))
        return set().union(*found)

    async def partition_ids(self, queues: list[str], partitions: list[str]) -> list[Row]:
        names = list(zip(queues, partitions, strict=True))
        listed = await self._homes.listed(names)
        positions: dict[int, list[int]] = defaultdict(list)
        for position, name in enumerate(names, start=1):
            if name in listed:
                positions[listed[name]].append(position)

        async def ids_on(home: int, mine: list[int]) -> list[Row]:
            store = await self._members.store(home)
            rows = await store.messages.partition_ids([queues[at - 1] for at in mine],
                                                      [partitions[at - 1] for at in mine])
            return [(mine[row[0] - 1], row[1]) for row in rows]

        return sorted(_joined(await everywhere(ids_on(home, mine) for home, mine in positions.items())))

    async def expired_leases(self, limit: int) -> list[Row]:
        found = await asyncio.gather(*(member.expired_leases(limit) for member in self._pooled))
        return [row for rows in found for row in rows][:limit]


class _Gathered:
    """What a pop over several members has gathered so far: the messages delivered, the hints
    handed back, each asked member's sweep result and the group's policy, and the room left."""

    def __init__(self, room: int, partitions: int):
        self.rows: list[Row] = []
        self.hints_left: list[str] = []
        self.sweeps: list[bool | None] = []  # of each member asked: whether its sweep found work
        self.conflating: bool | None = None
        self.policy_told = False  # a member told the group's policy: the others are not asked for it
        self.room, self.partitions_left = room, partitions

    @property
    def full(self) -> bool:
        return self.room <= 0 or self.partitions_left <= 0

    @property
    def empty(self) -> bool:
        return not self.rows

    def unreached(self, hints: list[str]) -> None:
        """A member asked did not answer: its hints are handed back."""
        self.hints_left += hints
        self.sweeps.append(None)

    def take(self, rows: list[Row]) -> None:
        last = rows[-1] if rows else None
        self.sweeps.append(None if last is None else last[_SWEPT])
        if last is None:
            return
        if last[_PARTITION_ID] is None:  # said something: hints left, the group's policy
            self.hints_left += last[_HINTS_LEFT] or []
            self.policy_told = self.policy_told or last[_CONFLATING] is not None
            self.conflating = last[_CONFLATING] if self.conflating is None else self.conflating
            rows = rows[:-1]
        if rows:
            self.rows += rows
            self.conflating = False if self.conflating is None else self.conflating  # a queue matched
            self.room -= sum(len(row[_PAYLOADS]) for row in rows)
            self.partitions_left -= len({row[_PARTITION_ID] for row in rows})

    def answer(self, members: int) -> list[Row]:
        """The pop's rows as one database answers them (see Messages.pop)."""
        swept = _swept(self.sweeps, members)
        if not self.rows and not self.hints_left and swept is None and self.conflating is None:
            return []
        return [*self.rows, _trailer(self.hints_left, swept, self.conflating)]


def _shares(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, each share at least 1 (``total`` is at
    least the number of shares), the shares adding up to ``total``."""
    spare = total - len(weights)
    exact = [spare * weight / sum(weights) for weight in weights]
    shares = [1 + int(part) for part in exact]
    by_remainder = sorted(range(len(weights)), key=lambda index: int(exact[index]) - exact[index])
    for index in by_remainder[:total - sum(shares)]:
        shares[index] += 1
    return shares


def _order(oldest: int | None, hinted: dict[int, list[str]], members: int, turn: int, scan: bool) -> list[int]:
    """The order in which a reader's wildcard pop asks the members. First the home of the
    oldest hint (``oldest``): hints are then checked oldest first, as one database checks
    them, so a member whose partitions are hinted less often than another's is not passed
    over while the other's hints keep coming. Then the members with the most hints, and those
    with as many (none, mostly) in turn from the reader's ``turn``-th pop on, so that no
    member's sweep waits behind another's. A pop that looks the recent writes up (``scan``)
    asks them all in turn, whatever its hints: such a look-up finds work that no hint names
    (written before the reader's hints began), and a member's must not wait behind another
    member's stream of hinted work."""
    if scan:
        return [(turn + step) % members for step in range(members)]
    rest = sorted((home for home in range(members) if home != oldest),
                  key=lambda home: (-len(hinted[home]), (home - turn) % members))
    return rest if oldest is None else [oldest, *rest]


def _swept(sweeps: list[bool | None], members: int) -> bool | None:
    """Whether the pop's sweep found work, as one database's sweep would say it: it found some
    if any member's did; it found none only when every member swept and found none (the
    engine then pauses the sweeps of the reader); otherwise it did not sweep them all."""
    if True in sweeps:
        return True
    if len(sweeps) == members and all(found is False for found in sweeps):
        return False
    return None


def _unasked(hinted: dict[int, list[str]], homes: list[int]) -> list[str]:
    return [hint for home in homes for hint in hinted[home]]


def _trailer(hints_left: list[str], swept: bool | None, conflating: bool | None) -> Row:
    """A pop's last row without a message (see Messages.pop): hints left unchecked, whether a
    sweep found work, the group's policy."""
    return (None, None, None, None, None, [], None, None, swept, hints_left, None, conflating)


def _joined(answers: list[list[Row]]) -> list[Row]:
    return [row for rows in answers for row in rows]
