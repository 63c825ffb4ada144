"""Moving idle partitions to the member databases placement names for them (`reginamq shards
rebalance`; docs/shards.md, "Rebalancing").

A new partition is placed by a rendezvous hash of its name over the members it meets
(:func:`~reginamq.store.members.place`), and nothing moves when a member is added. A rebalance
lists, on every member, the idle partitions (nothing written for ``idle_seconds``, no live
lease, nothing unconsumed by a reader with a cursor on them) whose name placement now puts on
another member, and moves them there in batches. The rendezvous hash moves only the names whose
placement changed: after an add, about the new member's share, all of them to the new member.

Each batch moves partitions from one member to one other in one two-phase transaction over the
old home, the new home and the catalog (store/two_phase.py), so a batch lands whole or not at
all, whatever fails and wherever the process is killed:

1. the old home takes the batch's partitions out, each with every row it owns (segments,
   cursors, dedup keys, dead letters, deleted marks, traces, stream state), skipping any a push,
   a pop or an ack holds, or that stopped being idle (``Moves.take_out``), and lists their names
   as moved;
2. the new home mints an id for each (a partition's id tells its home) and writes the rows
   under it;
3. the catalog's directory lists each name under its new id.

A broker that routes a moved name from its cache before it forgets it is refused by the old
home (rq_refuse_moved, 002_push.sql) and looks the name up again; every process forgets the
names moved since it last looked, every maintenance round (``Homes.forget_moved``)."""

from __future__ import annotations

import functools
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import MembershipMismatch, join_up, place
from reginamq.store.two_phase import Joined, TwoPhase

# Idle partitions a member lists in one query: a rebalance moves them before it lists more.
LISTED_PER_QUERY = 10_000
DEFAULT_IDLE_SECONDS = 60.0
DEFAULT_BATCH = 100


@dataclass(frozen=True)
class Move:
    source: int
    target: int
    id: uuid.UUID
    queue: str
    partition: str


@dataclass
class Rebalanced:
    """What a rebalance found and did, by (old home, new home)."""

    planned: Counter[tuple[int, int]] = field(default_factory=Counter)  # idle partitions placed elsewhere
    moved: Counter[tuple[int, int]] = field(default_factory=Counter)

    @property
    def skipped(self) -> int:
        """Planned partitions left where they were: they stopped being idle before their batch."""
        return sum(self.planned.values()) - sum(self.moved.values())


async def _planned(store: Store, ordinal: int, member_ids: list[uuid.UUID], queue: str | None,
                   idle_seconds: float) -> AsyncIterator[list[Move]]:
    """Page after page, member ``ordinal``'s idle partitions (of ``queue``, or of every queue)
    that placement puts on another member, each with where it goes."""
    after = None
    while True:
        rows = await store.moves.movable(after, LISTED_PER_QUERY, idle_seconds, queue)
        placed = ((row, place(row["queue"], row["partition"], member_ids)) for row in rows)
        yield [Move(ordinal, target, row["id"], row["queue"], row["partition"])
               for row, target in placed if target != ordinal]
        if len(rows) < LISTED_PER_QUERY:
            return
        after = rows[-1]["id"]


async def rebalance(databases: list[Database], queue: str | None = None, idle_seconds: float = DEFAULT_IDLE_SECONDS,
                    limit: int | None = None, batch: int = DEFAULT_BATCH, dry_run: bool = False,
                    progress: Callable[[Rebalanced], None] | None = None) -> Rebalanced:
    """Moves up to ``limit`` idle partitions (of ``queue``, or of every queue) of the deployment
    whose members ``databases`` are to where placement puts them, ``batch`` at a time; with
    ``dry_run`` only counts them. Each member's partitions are listed a page at a time and a
    page is moved before the next is listed, so a rebalance holds one page, whatever the
    number of partitions, and reads idleness shortly before it moves. ``progress`` is told
    after each batch."""
    deployment = await join_up(databases)
    if len(deployment.members) != len(databases):
        raise MembershipMismatch("give every member of the deployment with --database-url, each once")
    member_ids = [member.id for member in deployment.members]
    coordinator = TwoPhase({member.ordinal: member.database for member in deployment.members})
    if not dry_run:
        await coordinator.recover()  # a rebalance killed halfway may hold the rows of a batch
    done = Rebalanced()
    for member in deployment.members:
        async for moves in _planned(Store(member.database), member.ordinal, member_ids, queue, idle_seconds):
            if limit is not None:
                moves = moves[:limit - sum(done.planned.values())]
            done.planned.update((move.source, move.target) for move in moves)
            if not dry_run:
                await _move_page(coordinator, moves, batch, idle_seconds, done, progress)
            if limit is not None and sum(done.planned.values()) >= limit:
                return done
    return done


async def _move_page(coordinator: TwoPhase, moves: list[Move], batch: int, idle_seconds: float, done: Rebalanced,
                     progress: Callable[[Rebalanced], None] | None) -> None:
    """``moves`` (of one old home), ``batch`` at a time to each new home."""
    routes: dict[int, list[Move]] = defaultdict(list)
    for move in moves:
        routes[move.target].append(move)
    for target, bound in routes.items():
        for chunk in (bound[start:start + batch] for start in range(0, len(bound), batch)):
            source = chunk[0].source
            moved = await coordinator.atomically(functools.partial(_move, source=source, target=target,
                                                                   moves=chunk, idle_seconds=idle_seconds))
            done.moved[source, target] += moved
            if progress is not None:
                progress(done)


async def _move(joined: Joined, source: int, target: int, moves: list[Move], idle_seconds: float) -> int:
    names = {move.id: (move.queue, move.partition) for move in moves}
    taken = await (await joined.store(source)).moves.take_out(list(names), idle_seconds)
    if not taken.ids:
        return 0
    new_home = await joined.store(target)
    new_ids = await new_home.provisioning.mint(len(taken.ids))
    await new_home.moves.put_in(taken, new_ids)
    await (await joined.store(0)).directory.relist(
        {names[old]: new for old, new in zip(taken.ids, new_ids, strict=True)})
    return len(taken.ids)
