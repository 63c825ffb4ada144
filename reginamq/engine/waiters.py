"""Long-poll wake-ups: parked pops wait here, holding no database connection.

Once a push has committed, the store announces ``queue + "\n" + partition ids`` on the
``rq_push`` channel (store/notices.py); every broker process listens on one connection of its
own and wakes the pops parked on that queue, so a push on any worker process or node wakes a
waiter at once, and hands the partition ids to the process's hot list (hot_partitions.py), where
wildcard pops look first. The process that pushed hands the partitions to its hot list and
wakes its own parked pops before it announces (:meth:`Waiters.wake_before_announcing`), so a
pop it wakes finds the partitions it was woken for, and adds to the notice, a line each, the
consumer groups it has fully served, whose pops the other processes then leave parked: a push
wakes as many pops as its partitions need across all processes, not that many in each. Hearing
its own notice back, the process does not hand the partitions out again (a hint its pop
already took would cost an empty query).
Notifications are hints only: a waiter that misses one still re-checks on its own back-off
schedule, so a lost hint costs latency, never a message.
The same connection hears ``rq_config`` (a queue was configured or deleted), so what a process caches
about queue options is dropped everywhere at once rather than when it ages out, and
``rq_sync``: PostgreSQL delivers notifications to a listener in commit order, so once a
process hears a notification it sent itself, it has heard every one committed before --
:meth:`Waiters.sync` is how a pop knows its hints include every push its client saw answered.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import logging
import os
from collections.abc import Callable

from reginamq.engine.hot_partitions import HotPartitions
from reginamq.store import Store
from reginamq.store.notices import CHANNEL, CONFIG_CHANNEL, EPHEMERAL_CHANNEL, SYNC_CHANNEL, Listener

log = logging.getLogger("reginamq.waiters")
ANY_QUEUE = "*"
SYNC_TIMEOUT = 1.0  # a database this slow to echo a notification makes a look-up no cheaper
MAX_NOTICE_BYTES = 7_900  # PostgreSQL refuses a notification payload of 8,000 bytes or more
MAX_OWN_NOTICES = 10_000  # own notices awaiting their echo; more means the echoes were lost


def ephemeral_key(queue: str) -> str:
    """What a waiting ephemeral pop parks under: no durable queue name holds a control character.
    An ephemeral queue's waiting pops are woken by the ``rq_ephemeral`` channel (engine/ephemeral.py)."""
    return "\x1f" + queue


async def announce(store: Store, notices: list[str], channel: str = CHANNEL) -> None:
    """Send ``notices`` on ``channel`` for writes already made: with the commit of the store's
    transaction when it has one (they must not be heard before its writes are visible), else at
    once; after a commit a failure is logged, never raised (a lost notification costs a waiter
    its back-off, never a message)."""
    await store.notices.announce(channel, notices)


class Waiters:
    def __init__(self, on_config_change: Callable[[], None] = lambda: None,
                 hot: HotPartitions | None = None,
                 on_queue_change: Callable[[str], None] = lambda _queue: None,
                 on_push_wake: Callable[[int, bool], None] = lambda _pops, _heard: None) -> None:
        self._on_config_change = on_config_change
        self._on_push_wake = on_push_wake
        self._on_queue_change = on_queue_change
        self._hot = hot
        self._syncs: dict[str, asyncio.Future] = {}  # token -> heard back
        # catalog_only -> the callers of that kind of round not sent yet
        self._gathering: dict[bool, list[asyncio.Future]] = {}
        self._sending: set[asyncio.Task] = set()
        self._sync_tokens = (f"{os.getpid()}:{n}" for n in itertools.count())
        # queue (or ANY_QUEUE) -> consumer group -> its parked pops, each with the partitions it
        # may claim and whether it is bound to one partition, insertion-ordered: the longest
        # waiter of a group is woken first.
        self._parked: dict[str, dict[str, dict[asyncio.Future, tuple[int, bool]]]] = {}
        # "queue\npartitions" of the notices this process handed to its hot list before sending
        # them: hearing one of them back adds no hint (a count each, the same notice may repeat)
        self._own_notices: collections.Counter[str] = collections.Counter()
        self._listener: Listener | None = None
        self._listening = False  # the LISTENs are in place on self._listener
        self._task: asyncio.Task | None = None
        self._closing = False

    @property
    def parked(self) -> int:
        """Long polls waiting now."""
        return sum(len(pops) for groups in self._parked.values() for pops in groups.values())

    def park(self, queue: str | None, group: str, partitions: int = 1, bound: bool = False) -> asyncio.Future:
        """Register interest before looking, so a push between the look and the wait is not
        missed; ``partitions``: how many partitions the pop may claim when woken; ``bound``: it
        pops one named partition, so it may not take what a push to another one wrote."""
        future = asyncio.get_running_loop().create_future()
        if self._closing:
            future.set_result(False)
            return future
        self._parked.setdefault(queue or ANY_QUEUE, {}).setdefault(group, {})[future] = (max(1, partitions), bound)
        return future

    def unpark(self, queue: str | None, group: str, future: asyncio.Future) -> None:
        key = queue or ANY_QUEUE
        groups = self._parked.get(key)
        waiting = groups.get(group) if groups is not None else None
        if waiting is not None:
            waiting.pop(future, None)
            if not waiting:
                del groups[group]
                if not groups:
                    del self._parked[key]
        if not future.done():
            future.cancel()

    def wake(self, queue: str, group: str | None = None, partitions: int = 1,
             served: frozenset[str] = frozenset()) -> int:
        """Wake, in each consumer group of the queue (and among the discovery pops), or in
        ``group`` only, as many parked pops as it takes to claim ``partitions`` partitions, the
        longest waiting first; answer how many were woken.

        A push announces the partitions it wrote: waking fewer pops than those partitions need
        would leave the rest to a chain of wake-ups, one pop's round trip each; waking more
        would turn the extra pops into empty ones. Every group, since each reads every message.
        A woken pop that took all it could wakes the next of its group (see pop.py), so a
        backlog is still handed out; a parked pop also re-checks on its own back-off, so a
        missed wake-up costs at most that. The groups of the queue in ``served`` are left
        parked: the process that pushed has woken enough of their pops already.
        """
        return self._wake(queue, group, partitions, served)[0]

    def wake_before_announcing(self, notices: list[str]) -> list[str]:
        """Wake this process's pops for the partitions of push ``notices`` (just committed, not
        yet sent) and return the notices to send, each naming on lines of its own the groups
        whose wake-up is complete here: as many unbound pops woken as its partitions need.
        The other processes (and this one, hearing its own notice) leave those groups' pops
        parked. A group that does not fit in the notice is left out: everyone wakes it, as if
        this process had woken none of it."""
        out = []
        for notice in notices:
            queue, _, partitions = notice.partition("\n")
            if self._hot is not None:
                self._hot.pushed(queue, partitions.split(","))
                if self.listening:
                    self._remember_own(notice)
            woken, served = self._wake(queue, None, partitions.count(",") + 1, frozenset())
            self._on_push_wake(woken, False)
            room = MAX_NOTICE_BYTES - len(notice.encode())
            for group in served:
                room -= len(group.encode()) + 1
                if room < 0:
                    break
                notice += "\n" + group
            out.append(notice)
        return out

    def _wake(self, queue: str, group: str | None, partitions: int,
              served: frozenset[str]) -> tuple[int, list[str]]:
        """How many pops were woken, and the groups of ``queue`` (not of the discovery pops)
        with enough unbound pops woken for ``partitions``."""
        woken = 0
        complete = []
        for key in (queue, ANY_QUEUE):
            groups = self._parked.get(key)
            if not groups:
                continue
            for name in [group] if group is not None else list(groups):
                if key == queue and name in served:
                    continue
                waiting = groups.get(name)
                wanted = partitions
                unbound = True
                while waiting and wanted > 0:
                    future = next(iter(waiting))
                    claims, bound = waiting.pop(future)
                    if not future.done():
                        future.set_result(True)
                        woken += 1
                        wanted -= claims
                        unbound = unbound and not bound
                if waiting is not None and not waiting:
                    del groups[name]
                if key == queue and wanted <= 0 and unbound:
                    complete.append(name)
            if not groups:
                del self._parked[key]
        return woken, complete

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def listening(self) -> bool:
        """True once every channel is LISTENed to: a connection that is open but not yet
        listening would not hear a notification sent now, so a sync would wait out its timeout."""
        return self._listening and self._listener is not None and self._listener.open

    def close(self) -> None:
        """Shutting down: every parked pop answers now (empty) instead of waiting its timeout."""
        self._closing = True
        for groups in self._parked.values():
            for waiting in groups.values():
                _resolve(waiting, False)
        self._parked.clear()
        if self._task is not None:
            self._task.cancel()

    async def listen(self, store: Store) -> None:
        self._task = asyncio.get_running_loop().create_task(self._listen_forever(store))

    async def listen_again(self) -> None:
        """Closes the listening connections, so that the listening starts again on the store's
        members as they are now (a member was added)."""
        if self._listener is not None:
            await self._listener.close()

    async def stop(self) -> None:
        self.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._listener is not None:
            await self._listener.close()

    async def _listen_forever(self, store: Store) -> None:
        handlers = {CHANNEL: self._on_notify, CONFIG_CHANNEL: self._on_config, SYNC_CHANNEL: self._on_sync,
                    EPHEMERAL_CHANNEL: self._on_ephemeral}
        delay = 0.2
        while not self._closing:
            try:
                self._listening = False
                lost = asyncio.get_running_loop().create_future()
                self._listener = await store.notices.listen(handlers, functools.partial(settle, lost))
                self._listening = True
                delay = 0.2
                # A reconnect may have missed hints: wake everyone to re-check, forget options.
                self._wake_all()
                self._on_config_change()
                self._own_notices.clear()
                if self._hot is not None:
                    self._hot.forget()
                await lost
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the database may be down: keep trying
                log.debug("listener connection failed: %s", error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _remember_own(self, notice: str) -> None:
        if len(self._own_notices) >= MAX_OWN_NOTICES:  # some were never heard back: hint twice rather than never
            self._own_notices.clear()
        self._own_notices[notice] += 1

    def _heard_own(self, notice: str) -> bool:
        count = self._own_notices.get(notice)
        if not count:
            return False
        if count == 1:
            del self._own_notices[notice]
        else:
            self._own_notices[notice] = count - 1
        return True

    def _on_notify(self, payload: str) -> None:
        queue, _, partitions = payload.partition("\n")
        partitions, *served = partitions.split("\n")
        if not partitions:  # a consumer group sought or deleted: not a push
            self._on_queue_change(queue)
        if self._hot is not None:
            if not partitions:
                self._hot.changed(queue)
            elif not self._heard_own(f"{queue}\n{partitions}"):
                self._hot.pushed(queue, partitions.split(","))
        if partitions:
            self._on_push_wake(self.wake(queue, partitions=partitions.count(",") + 1, served=frozenset(served)), True)
        else:
            self.wake(queue)

    def _on_ephemeral(self, queue: str) -> None:
        self.wake(ephemeral_key(queue))

    def _on_config(self, _queue: str) -> None:
        self._on_config_change()

    async def sync(self, store: Store, catalog_only: bool = False) -> bool:
        """Wait until this process has heard every notification committed before the call;
        False if it could not tell (no listener, or no answer within SYNC_TIMEOUT).
        ``catalog_only``: over several databases, those committed on the catalog, which carries
        every configure's and delete's notice but not the other members' writes
        (store/sharded_notices.py); on one database the same as a whole sync.

        Calls share rounds: a call joins a round that covers it (a whole one, or one of the
        catalog for a call that asks no more) whose notification has not been sent yet (it is
        sent after the call began, so it covers the call), or opens one. However many pops ask
        at once, one notification of each kind is in flight and at most one more is gathering.
        """
        if not self.listening or self._closing:
            return False
        loop = asyncio.get_running_loop()
        heard = loop.create_future()  # this caller's own: its cancellation touches no other
        callers = self._gathering.get(False, self._gathering.get(catalog_only))
        if callers is None:
            callers = self._gathering[catalog_only] = []
            sending = loop.create_task(self._send_sync(store, callers, catalog_only))
            self._sending.add(sending)
            sending.add_done_callback(self._sending.discard)
        callers.append(heard)
        return await heard

    async def _send_sync(self, store: Store, callers: list[asyncio.Future], catalog_only: bool) -> None:
        """One round: send a token, wait (at most SYNC_TIMEOUT from the round's start) to hear
        it back, and answer every caller that joined the round."""
        token = next(self._sync_tokens)
        echoed = asyncio.get_running_loop().create_future()
        self._syncs[token] = echoed

        def sending() -> None:
            if self._gathering.get(catalog_only) is callers:
                del self._gathering[catalog_only]  # who comes from now on needs a later notification

        heard = False
        try:
            async with asyncio.timeout(SYNC_TIMEOUT):
                await store.notices.notify(SYNC_CHANNEL, [token], sending, catalog_only)
                heard = await echoed
        except Exception as error:  # the callers answer False: their pops look everything up
            log.debug("sync failed: %s", error or type(error).__name__)
        finally:
            self._syncs.pop(token, None)
            sending()
            _resolve(callers, heard)

    def _on_sync(self, token: str) -> None:
        heard = self._syncs.get(token)
        if heard is not None and not heard.done():
            heard.set_result(True)

    def _wake_all(self) -> None:
        for key in list(self._parked):
            for waiting in self._parked.pop(key, {}).values():
                _resolve(waiting, True)


def _resolve(futures, value: bool) -> None:
    for future in futures:
        settle(future, value)


def settle(future: asyncio.Future, value: object = None) -> None:
    """Give ``future`` its result unless something settled it first."""
    if not future.done():
        future.set_result(value)
