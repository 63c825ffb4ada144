"""What a broker keeps of the directory (store/homes.py): each listed name's member, told by its
id; at most KEPT_NAMES names, the oldest forgotten first; names that moved and queues deleted
forgotten at once; a name whose member this process does not serve yet is the catalog's until it
does."""

from __future__ import annotations

import uuid

import pytest

from reginamq.store import homes as homes_module
from reginamq.store.database import Database
from reginamq.store.homes import Homes
from reginamq.store.members import MAX_MEMBERS, Deployment, Member
from tests.unit.test_placement import scrambled

NUMBERS_FROM = MAX_MEMBERS


def databases(count: int) -> list[Database]:
    return [Database(f"postgresql://127.0.0.1:1/m{ordinal}", 1) for ordinal in range(count)]


def deployed(count: int) -> Homes:
    members = databases(count)
    homes = Homes(members)
    homes.join(Deployment([Member(uuid.UUID(int=ordinal + 1), ordinal, database)
                           for ordinal, database in enumerate(members)], NUMBERS_FROM))
    return homes


def id_on(ordinal: int, step: int) -> uuid.UUID:
    return scrambled(NUMBERS_FROM + ordinal + step * MAX_MEMBERS)


def kept(homes: Homes) -> dict[tuple[str, str], int]:
    return {name: home for name in _names(homes) if (home := homes._kept(name)) is not None}


def _names(homes: Homes) -> list[tuple[str, str]]:
    return [(queue, partition) for queue, partitions in homes._listed.items() for partition in partitions]


def test_a_kept_name_is_its_member_as_its_id_tells():
    homes = deployed(3)
    homes._keep({("q", "a"): id_on(2, 0), ("q", "b"): id_on(1, 5), ("r", "a"): id_on(0, 9)})
    assert kept(homes) == {("q", "a"): 2, ("q", "b"): 1, ("r", "a"): 0}
    assert homes._listed_count == 3


def test_past_the_bound_the_oldest_names_are_forgotten_first(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(homes_module, "KEPT_NAMES", 20)
    homes = deployed(2)
    homes._keep({("first", f"p{n}"): id_on(n % 2, n) for n in range(15)})
    homes._keep({("second", f"p{n}"): id_on(1, n) for n in range(6)})  # 21 kept: past the bound
    assert homes._listed_count == 18  # the oldest forgotten until a tenth of the bound is free
    assert _names(homes)[:2] == [("first", "p3"), ("first", "p4")]
    homes._keep({("third", f"p{n}"): id_on(0, n) for n in range(14)})  # the first queue goes whole
    assert "first" not in homes._listed
    assert homes._listed_count == len(_names(homes)) == 18


def test_moved_names_and_deleted_queues_are_forgotten_and_counted():
    homes = deployed(2)
    homes._keep({("q", "a"): id_on(0, 0), ("q", "b"): id_on(1, 1), ("r", "a"): id_on(1, 2)})
    homes._keep({("q", "a"): id_on(1, 3)})  # listed again (relisted after a move): not counted twice
    assert homes._listed_count == 3 and kept(homes)[("q", "a")] == 1
    homes.forget_names([("q", "a"), ("q", "never-kept")])
    homes.forget_queue("r")
    assert kept(homes) == {("q", "b"): 1}
    assert homes._listed_count == 1


def test_a_name_on_a_member_not_served_yet_is_the_catalogs_until_that_member_is_added():
    homes = deployed(2)
    homes._keep({("q", "a"): id_on(2, 0), ("q", "b"): id_on(1, 0)})
    assert kept(homes) == {("q", "a"): 0, ("q", "b"): 1}
    homes.admit(Member(uuid.UUID(int=3), 2, databases(1)[0]))
    assert kept(homes) == {("q", "a"): 2, ("q", "b"): 1}
