"""How the sharded families (sharded_*.py) put the members' answers together: calls on every
member run concurrently and all finish before a failure is raised (:func:`everywhere`), so no
call outlives the answer; merged rows read as the members' rows do (:class:`Record`); a page
over members is the page one database holding all their rows gives (:func:`merged`): each
member is asked for its first ``limit + offset`` rows, which are merged in the SQL's order and
sliced. Names are compared by code point, PostgreSQL's ``COLLATE "C"`` order, which the
embedded servers use.

A read that lists or counts over every member for an operator (resources, consumer-group
lag, DLQ and message pages, statistics, traces) answers from the members it reaches
(:func:`on_reached`): a member out of reach is left out of the answer and named in
:data:`unreached`, which the HTTP layer turns into a response header, so that one member down
takes only its own rows out of those answers. It fails only when no member answers. Writes, and
reads a decision rests on, still need every member (:func:`on_every`)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, TypeVar

from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.database import Row
from reginamq.store.homes import Homes

T = TypeVar("T")
Merged = dict[str, Any]  # a row made of members' rows, read by column name
# A page's sort key: (column, descending) pairs, the first deciding first (the SQL's ORDER BY).
Order = Sequence[tuple[str, bool]]
EVERY_ROW = 2**31 - 1  # the largest page size a statement takes: past every member's rows
# The ordinals of the members the reads of the request being answered could not reach; None
# where no caller collects them (engine/partial.py opens a collection per request).
unreached: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("unreached", default=None)


class Record(tuple):
    """A row made from members' rows, read by position or by column name as an asyncpg
    ``Record`` is."""

    _columns: Mapping[str, int]

    def __new__(cls, columns: Mapping[str, int], values: Iterable[Any]) -> Record:
        row = super().__new__(cls, values)
        row._columns = columns
        return row

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._columns[key] if isinstance(key, str) else key)

    def keys(self) -> Iterable[str]:
        return self._columns.keys()


def replaced(row: Row | Record, **values: Any) -> Record:
    """``row`` with the columns named in ``values`` set to them."""
    columns = {name: position for position, name in enumerate(row.keys())}
    fields = list(row)
    for name, value in values.items():
        fields[columns[name]] = value
    return Record(columns, fields)


def settled(answers: list[T | BaseException]) -> list[T]:
    """The answers of calls gathered with ``return_exceptions``, or the first failure raised."""
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers  # type: ignore[return-value]


async def everywhere(calls: Iterable[Awaitable[T]]) -> list[T]:
    """The answers of ``calls``, run concurrently; when one fails, the others finish and the
    first failure is raised."""
    return settled(await asyncio.gather(*calls, return_exceptions=True))


async def on_reached(stores: list[Store], call: Callable[[Store], Awaitable[T]]) -> list[T]:
    """``call`` on every member's store concurrently; the answers of the members that answered,
    in ordinal order (the first is the catalog's when it answered). A member out of reach is
    left out and its ordinal added to :data:`unreached`; when none answers, the first failure
    is raised."""
    answers = await asyncio.gather(*(call(store) for store in stores), return_exceptions=True)
    missed = [ordinal for ordinal, answer in enumerate(answers) if isinstance(answer, Unavailable)]
    reached = [answer for answer in answers if not isinstance(answer, Unavailable)]
    if not reached:
        raise answers[0]
    collected = unreached.get()
    if collected is not None:
        collected.update(missed)
    return settled(reached)


def sorted_rows(rows: Iterable[Row | Record], order: Order) -> list[Row | Record]:
    """``rows`` in ``order``; rows equal in it keep the order they came in."""
    ordered = list(rows)
    for column, descending in reversed(order):
        ordered.sort(key=itemgetter(column), reverse=descending)
    return ordered


async def merged(homes: Homes, ask: Callable[[Store, int, int], Awaitable[list[Row]]], order: Order, limit: int,
                 offset: int) -> list[Row | Record]:
    """The page (``ask(store, limit, offset)``, each row carrying ``total``) that one database
    holding every member's rows would answer, in the SQL's ``order``: every member's pool asked
    concurrently for its first ``limit + offset`` rows, merged, sliced (of the members reached:
    :func:`on_reached`). ``order`` need only tell
    rows of different members apart: rows of one member that it ties keep that member's order.
    ``total`` is the sum of the members' totals (a row lives on one member)."""
    pages = await on_reached(homes.stores, lambda store: ask(store, min(limit + offset, EVERY_ROW), 0))
    total = sum(page[0]["total"] for page in pages if page)
    return [replaced(row, total=total) for row in sorted_rows((row for page in pages for row in page), order)
            [offset:offset + limit]]


async def paged(homes: Homes, queue: str, partition: str | None,
                ask: Callable[[Store, int, int], Awaitable[list[Row]]], order: Order, limit: int,
                offset: int) -> list[Row | Record]:
    """A page of ``queue`` (see :func:`merged`), or of one partition of it: then its home's page."""
    if partition is not None:
        return await ask(homes.stores[await homes.of_name(queue, partition)], limit, offset)
    return await merged(homes, ask, order, limit, offset)


async def on_every(stores: list[Store], call: Callable[[Store], Awaitable[T]]) -> list[T]:
    """``call`` on every member's store (in ordinal order, the catalog's first), concurrently,
    as :func:`everywhere` runs calls."""
    return await everywhere(call(store) for store in stores)


def sums(rows: Iterable[Row], columns: Iterable[str]) -> Merged:
    """Each of ``columns`` summed over ``rows``."""
    rows = list(rows)
    return {column: sum(row[column] for row in rows) for column in columns}


def latest(instants: Iterable[Any]) -> Any:
    """The latest of ``instants`` that are known; ``None`` when none is."""
    return max((instant for instant in instants if instant is not None), default=None)


def earliest(instants: Iterable[Any]) -> Any:
    """The earliest of ``instants`` that are known; ``None`` when none is."""
    return min((instant for instant in instants if instant is not None), default=None)


def by_name(answers: list[list[Row]], column: str) -> list[list[Row]]:
    """The members' rows of each name in ``column``, in the catalog's order: for rows every
    member has alike (a queue, a namespace), each member's answer holding the same names."""
    named: dict[str, list[Row]] = {row[column]: [] for row in answers[0]}
    for rows in answers:
        for row in rows:
            if row[column] in named:
                named[row[column]].append(row)
    return list(named.values())
