"""Where a partition lives (store/members.py): its id tells its member, and a new name is placed
by rendezvous hashing, evenly and alike on every broker, moving no name but to a new member."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from reginamq.store.members import MAX_MEMBERS, home_of, home_of_text, place

MEMBERS = [uuid.UUID(int=n * 7919 + 1) for n in range(4)]


def scrambled(number: int) -> uuid.UUID:
    """The id rq_new_partition_id (001_queues_and_partitions.sql) makes of ``number``."""
    return uuid.UUID(bytes=(number * 11400714819323198485 % (1 << 64)).to_bytes(8, "big") + bytes(8))


@given(st.integers(0, MAX_MEMBERS - 1), st.integers(0, 2**40), st.integers(1, 2**40))
def test_a_number_given_out_by_a_member_tells_that_member(ordinal, steps, blocks):
    numbers_from = blocks * MAX_MEMBERS
    assert home_of(scrambled(numbers_from + ordinal + steps * MAX_MEMBERS), numbers_from) == ordinal


@given(st.integers(1, 2**40), st.integers(1, 2**40))
def test_a_number_from_before_the_deployment_is_the_catalogs(number, blocks):
    numbers_from = max(blocks * MAX_MEMBERS, number + 1)
    assert home_of(scrambled(number), numbers_from) == 0


@given(st.one_of(st.builds(scrambled, st.integers(0, 2**64 - 1)), st.uuids()), st.integers(0, 2**40),
       st.sampled_from([str, lambda text: text.upper(), lambda text: text.replace("-", "")]))
def test_an_id_given_as_text_tells_the_member_its_uuid_tells(partition_id, blocks, spelled):
    numbers_from = blocks * MAX_MEMBERS
    assert home_of_text(spelled(str(partition_id)), numbers_from) == home_of(partition_id, numbers_from)


def test_names_spread_evenly_over_the_members():
    names = [f"customer-{n}" for n in range(30_000)]
    counts = Counter(place("orders", name, MEMBERS[:3]) for name in names)
    assert sorted(counts) == [0, 1, 2]
    assert all(abs(count - 10_000) <= 500 for count in counts.values()), counts


def test_every_broker_places_a_name_on_the_same_member_whatever_order_it_lists_them():
    shuffled = [MEMBERS[2], MEMBERS[0], MEMBERS[1]]
    for n in range(2_000):
        assert MEMBERS[place("q", f"p{n}", MEMBERS[:3])] == shuffled[place("q", f"p{n}", shuffled)]


def test_a_member_added_takes_its_share_of_new_names_and_moves_none_between_old_members():
    names = [f"p{n}" for n in range(20_000)]
    moved = Counter()
    for name in names:
        before, after = place("q", name, MEMBERS[:3]), place("q", name, MEMBERS)
        if before != after:
            assert after == 3, name
            moved[after] += 1
    assert abs(moved[3] - 5_000) <= 400, moved


def test_queue_and_partition_names_do_not_run_into_each_other():
    """("a", "b/c1") and ("a/b", "c1") are different partitions: were they hashed as one string,
    forty such pairs would land alike (here, by chance, one in 4^40)."""
    assert [place("a", f"b/c{n}", MEMBERS) for n in range(40)] != [place("a/b", f"c{n}", MEMBERS) for n in range(40)]
