"""Where the calls for one member of a deployment run: on its pool, or inside a unit of
:meth:`TwoPhase.atomically <reginamq.store.two_phase.TwoPhase.atomically>`, on that unit's
transaction on the member, which the member joins at its first call (:class:`~.two_phase.Joined`).
The sharded families (sharded.py, sharded_messages.py) take a :class:`Members` and never
know which of the two they were given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from reginamq.store import Store


class Members(Protocol):
    """Where a member's calls run: its pool, or a unit's transaction on it (:class:`Joined`)."""

    async def store(self, ordinal: int) -> Store: ...


class Pooled:
    """Each member's calls on its pool."""

    def __init__(self, stores: list[Store]):
        self._stores = stores

    async def store(self, ordinal: int) -> Store:
        return self._stores[ordinal]


class OnMember:
    """Family ``family`` of member ``ordinal``, its calls made where ``members`` says: a unit's
    transaction joins the member at its first call."""

    def __init__(self, members: Members, ordinal: int, family: str):
        self._members = members
        self._ordinal = ordinal
        self._family = family

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            family = getattr(await self._members.store(self._ordinal), self._family)
            return await getattr(family, method)(*args, **kwargs)

        return call
