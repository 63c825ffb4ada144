"""The ``notices`` family over the members of a deployment of several databases
(docs/shards.md, "Long poll").

A write's notices go out on the member that made it, so a process listens on every member:
:meth:`ShardedNotices.listen` opens one listening connection per member, and the listening
ends, for all of them at once, as soon as one connection is lost (the caller then listens
again, as it does on one database). A member that cannot be reached is left out: the process
goes on hearing the others, its listening is not whole (:attr:`Listeners.open` is false, so a
sync cannot complete and its pops look recent writes up), and the listening ends once that
member answers again, so that the caller listens again on every member.

A notice sent by :meth:`ShardedNotices.notify` goes out on every member and reaches the
handler once every member has echoed it, so a process that hears its own sync token has heard
every notification committed on any member before it sent it. Sent ``catalog_only``, it goes out
on the catalog alone and reaches the handler with the catalog's echo: the process has then heard
what was committed on the catalog before it, which holds every notice of a configure or a delete
(they are announced there) but not the other members' writes. Notices of writes announced
outside a write (:meth:`ShardedNotices.announce`) go out on the catalog: every process hears
every member.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.notices import Listener
from reginamq.store.routing import Members

# Notices sent on every member whose echoes this process awaits at most; more means some were lost.
MAX_AWAITED = 10_000
# Seconds between looks at a member left out of the listening (see the module header).
REACHABLE_EVERY = 1.0


class Listeners:
    """The listening connections on the members, open while there is one on every member and
    all of them are; ``waiting`` watches the members left out (see the module header)."""

    def __init__(self, listeners: list[Listener], waiting: asyncio.Task | None = None):
        self._listeners = listeners
        self._waiting = waiting

    @property
    def open(self) -> bool:
        return self._waiting is None and all(listener.open for listener in self._listeners)

    async def close(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
        for listener in self._listeners:
            await listener.close()


class ShardedNotices:
    def __init__(self, stores: list[Store], members: Members):
        self._stores = stores
        self._members = members
        # (channel, payload) sent by notify → the members whose echo of it is still awaited
        self._echoes: dict[tuple[str, str], set[int]] = {}

    def _expect(self, channel: str, notices: list[str], ordinals: range) -> None:
        if len(self._echoes) >= MAX_AWAITED:  # echoes lost with a connection: start afresh
            self._echoes.clear()
        for notice in notices:
            self._echoes[(channel, notice)] = set(ordinals)

    async def announce(self, channel: str, notices: list[str]) -> None:
        await (await self._members.store(0)).notices.announce(channel, notices)

    async def notify(self, channel: str, notices: list[str], sending: Callable[[], None],
                     catalog_only: bool = False) -> None:
        """As :meth:`Notices.notify <reginamq.store.notices.Notices.notify>`, on every member (on
        the catalog alone if ``catalog_only``); each notice reaches this process's handlers once
        every member it went out on echoed it."""
        ordinals = range(1 if catalog_only else len(self._stores))
        self._expect(channel, notices, ordinals)
        try:
            sending()
            await asyncio.gather(*(self._stores[ordinal].notices.notify(channel, notices, lambda: None)
                                   for ordinal in ordinals))
        except BaseException:
            for notice in notices:
                self._echoes.pop((channel, notice), None)
            raise

    async def listen(self, handlers: Mapping[str, Callable[[str], None]], on_lost: Callable[[], None]) -> Listeners:
        """As :meth:`Notices.listen <reginamq.store.notices.Notices.listen>`, on every member it
        reaches (:class:`Unavailable` when it reaches none); ``on_lost`` is called once, when
        the first connection ends or a member left out answers again, and the others are closed."""
        listeners: list[Listener] = []
        lost_once = False

        def lost() -> None:
            nonlocal lost_once
            if not lost_once:
                lost_once = True
                for listener in listeners:
                    asyncio.get_running_loop().create_task(listener.close())
                on_lost()

        left_out: list[Store] = []
        try:
            for ordinal, store in enumerate(self._stores):
                heard = {channel: self._heard_from(ordinal, channel, handler) for channel, handler in handlers.items()}
                try:
                    listeners.append(await store.notices.listen(heard, lost))
                except Unavailable:
                    left_out.append(store)
            if not listeners:
                raise Unavailable("no member database can be listened on")
        except BaseException:
            for listener in listeners:
                with contextlib.suppress(Exception):
                    await listener.close()
            raise
        waiting = asyncio.get_running_loop().create_task(_reachable(left_out, lost)) if left_out else None
        return Listeners(listeners, waiting)

    def _heard_from(self, ordinal: int, channel: str, handler: Callable[[str], None]) -> Callable[[str], None]:
        def heard(payload: str) -> None:
            awaited = self._echoes.get((channel, payload))
            if awaited is None:
                handler(payload)
                return
            awaited.discard(ordinal)
            if not awaited:
                del self._echoes[(channel, payload)]
                handler(payload)

        return heard


async def _reachable(stores: list[Store], then: Callable[[], None]) -> None:
    """Calls ``then`` once every one of ``stores`` answers, asking each second."""
    while True:
        await asyncio.sleep(REACHABLE_EVERY)
        try:
            for store in stores:
                await store.membership.state()
        except Unavailable:
            continue
        then()
        return
