"""The per-process hot list: arrival order, hand-back, caps and forgetting idle readers."""

from __future__ import annotations

import pytest

from reginamq.engine import hot_partitions
from reginamq.engine.hot_partitions import HotPartitions


@pytest.fixture
def now(monkeypatch) -> list[float]:
    """The monotonic clock hotlist reads, moved by hand: ``now[0] += seconds``."""
    clock = [100.0]
    monkeypatch.setattr(hot_partitions.time, "monotonic", lambda: clock[0])
    return clock


@pytest.fixture
def wall(monkeypatch) -> list[float]:
    """The wall clock hotlist reads (``since``), moved by hand."""
    clock = [1_000_000.0]
    monkeypatch.setattr(hot_partitions.time, "time", lambda: clock[0])
    return clock


def test_hints_come_oldest_first_and_only_to_readers_that_popped():
    hot = HotPartitions()
    hot.pushed("q", ["before"])  # nobody reads q yet: nothing kept
    assert hot.take("q", "g", 1)[::2] == ([], True)
    hot.pushed("q", ["a", "b"])
    hot.pushed("q", ["c", "a"])  # a partition hinted already keeps its place
    taken, _, scan = hot.take("q", "g", 1)
    assert taken == ["a", "b", "c"] and scan is False  # scanned a moment ago, on the first take
    assert hot.take("q", "g", 1)[0] == []


def test_a_pop_takes_at_least_eight_and_twice_its_partitions():
    hot = HotPartitions()
    hot.take("q", "g", 1)
    hot.pushed("q", [f"p{n}" for n in range(100)])
    assert hot.take("q", "g", 1)[0] == [f"p{n}" for n in range(8)]
    assert hot.take("q", "g", 10)[0] == [f"p{n}" for n in range(8, 28)]


def test_hints_handed_back_queue_behind_the_others():
    hot = HotPartitions()
    hot.take("q", "g", 1)
    hot.pushed("q", ["a", "b", "c"])
    taken, _, _ = hot.take("q", "g", 1)
    hot.pushed("q", ["d"])
    hot.give_back("q", "g", taken[1:])
    assert hot.take("q", "g", 1)[0] == ["d", "b", "c"]


def test_each_group_has_its_own_hints():
    hot = HotPartitions()
    hot.take("q", "g1", 1)
    hot.take("q", "g2", 1)
    hot.pushed("q", ["a"])
    assert hot.take("q", "g1", 1)[0] == ["a"]
    assert hot.take("q", "g2", 1)[0] == ["a"]


def test_a_list_is_capped_by_dropping_the_oldest_and_the_sweep_takes_them_over(monkeypatch, wall):
    monkeypatch.setattr(hot_partitions, "MAX_HINTS_PER_READER", 3)
    hot = HotPartitions()
    since = hot.take("q", "g", 1)[1]
    assert since.timestamp() == wall[0] + hot_partitions.CLOCK_MARGIN_SECONDS
    wall[0] += 10
    hot.pushed("q", ["a", "b", "c", "d", "e"])
    taken, since, _ = hot.take("q", "g", 1)
    assert taken == ["c", "d", "e"]
    assert since.timestamp() == wall[0] + hot_partitions.CLOCK_MARGIN_SECONDS  # "a" and "b" are the sweep's


def test_the_full_lookup_runs_once_a_second_and_after_a_reconnect(now):
    hot = HotPartitions()
    assert hot.take("q", "g", 1)[2] is True
    assert hot.take("q", "g", 1)[2] is False
    now[0] += hot_partitions.SCAN_INTERVAL
    assert hot.take("q", "g", 1)[2] is True
    hot.forget()
    assert hot.take("q", "g", 1)[2] is True


def test_an_idle_reader_is_forgotten(now):
    hot = HotPartitions()
    hot.take("q", "idle", 1)
    hot.take("q", "busy", 1)
    now[0] += hot_partitions.IDLE_READER_SECONDS / 2
    hot.take("q", "busy", 1)
    now[0] += hot_partitions.IDLE_READER_SECONDS / 2 + 1
    hot.take("q", "busy", 1)  # the idle one is dropped here
    hot.pushed("q", ["a"])
    assert hot.take("q", "busy", 1)[0] == ["a"]
    assert hot.take("q", "idle", 1)[0] == []  # it registers afresh, without the hint


def test_a_change_without_partitions_hands_the_queue_back_to_the_sweep(wall):
    hot = HotPartitions()
    hot.take("q", "g", 1)
    hot.take("other", "g", 1)
    wall[0] += 100
    hot.changed("q")
    _, since, scan = hot.take("q", "g", 1)
    assert since.timestamp() == wall[0] + hot_partitions.CLOCK_MARGIN_SECONDS and scan is True
    assert hot.take("other", "g", 1)[1].timestamp() == 1_000_000.0 + hot_partitions.CLOCK_MARGIN_SECONDS


def test_look_ups_every_second_while_the_hints_are_young_then_a_safety_net(now):
    hot = HotPartitions()
    assert hot.take("q", "g", 1)[2] is True  # a new reader looks at once
    now[0] += 1.0
    assert hot.take("q", "g", 1)[2] is True
    now[0] += hot_partitions.CATCH_UP_SECONDS
    assert hot.take("q", "g", 1)[2] is False  # caught up: the safety net only
    now[0] += hot_partitions.SAFETY_SCAN_INTERVAL
    assert hot.take("q", "g", 1)[2] is True
    now[0] += 1.0
    assert hot.take("q", "g", 1)[2] is False
    hot.changed("q")  # the hints begin again: every second again
    assert hot.take("q", "g", 1)[2] is True
    now[0] += 1.0
    assert hot.take("q", "g", 1)[2] is True


def test_hints_replace_the_look_up_once_the_reader_has_caught_up(now):
    hot = HotPartitions()
    hot.take("q", "g", 1)
    hot.pushed("q", ["a"])
    now[0] += 1.0
    assert hot.take("q", "g", 1)[::2] == (["a"], True)  # young hints: look up beside them
    now[0] += hot_partitions.CATCH_UP_SECONDS
    hot.pushed("q", ["b"])
    assert hot.take("q", "g", 1)[::2] == (["b"], False)  # caught up: the hints suffice
    now[0] += hot_partitions.SAFETY_SCAN_INTERVAL
    hot.pushed("q", ["c"])
    assert hot.take("q", "g", 1)[::2] == (["c"], False)
    assert hot.take("q", "g", 1)[::2] == ([], True)  # no hints: the safety net looks


def test_an_expired_lease_is_a_hint_only_for_a_reader_of_this_process():
    hot = HotPartitions()
    assert hot.has_readers() is False
    assert hot.lease_expired("q", "g", "p1") is False
    hot.take("q", "g", 1)
    assert hot.has_readers() is True
    assert hot.lease_expired("q", "g", "p1") is True
    assert hot.lease_expired("q", "other", "p2") is False
    assert hot.take("q", "g", 1)[0] == ["p1"]


def test_a_selection_reads_the_hints_of_the_queues_it_holds():
    hot = HotPartitions()
    hot.place_queues([("ns.a", "ns", "a"), ("ns.b", "ns", "b"), ("other", None, None)])
    hot.take(("ns", None), "g", 1)
    hot.take(("ns", "b"), "g", 1)
    hot.take("ns.a", "g", 1)
    hot.pushed("ns.a", ["a1"])
    hot.pushed("ns.b", ["b1"])
    hot.pushed("other", ["o1"])
    assert hot.take(("ns", None), "g", 10)[0] == ["a1", "b1"]
    assert hot.take(("ns", "b"), "g", 10)[0] == ["b1"]
    assert hot.take("ns.a", "g", 10)[0] == ["a1"]  # a queue's own reader keeps its hints too
    assert hot.directory_due() is False


def test_a_queue_the_directory_does_not_know_hints_every_selection_until_it_is_read_again(now):
    hot = HotPartitions()
    hot.place_queues([("ns.a", "ns", "a")])
    hot.take(("ns", None), "g", 1)
    hot.take(("elsewhere", None), "g", 1)
    hot.pushed("ns.new", ["n1"])  # created a moment ago: it may belong to either
    assert hot.take(("ns", None), "g", 10)[0] == ["n1"]
    assert hot.take(("elsewhere", None), "g", 10)[0] == ["n1"]
    assert hot.directory_due() is True
    hot.place_queues([("ns.a", "ns", "a"), ("ns.new", "ns", "new")])
    hot.pushed("ns.new", ["n2"])
    assert hot.take(("ns", None), "g", 10)[0] == ["n2"]
    assert hot.take(("elsewhere", None), "g", 10)[0] == []


def test_a_configured_queue_is_placed_again():
    hot = HotPartitions()
    hot.place_queues([("q", "old", None)])
    hot.take(("new", None), "g", 1)
    hot.pushed("q", ["p1"])
    assert hot.take(("new", None), "g", 10)[0] == []
    hot.forget_directory()  # configure may have moved q to another namespace
    hot.pushed("q", ["p2"])
    assert hot.take(("new", None), "g", 10)[0] == ["p2"]


def test_an_expired_lease_reaches_the_selections_of_its_group():
    hot = HotPartitions()
    hot.place_queues([("ns.a", "ns", "a")])
    hot.take(("ns", None), "g1", 1)
    hot.take(("ns", None), "g2", 1)
    assert hot.lease_expired("ns.a", "g1", "p1") is True
    assert hot.lease_expired("ns.a", "g3", "p1") is False
    assert hot.take(("ns", None), "g1", 10)[0] == ["p1"]
    assert hot.take(("ns", None), "g2", 10)[0] == []


def test_hints_a_selection_got_for_queues_placed_elsewhere_are_dropped_when_taken():
    hot = HotPartitions()
    hot.take(("ns", None), "g", 1)
    hot.pushed("ns.a", ["mine"])
    for n in range(20):  # e.g. expired leases of other queues, before the directory knows them
        assert hot.lease_expired(f"other{n}", "g", f"foreign{n}") is True
    hot.pushed("ns.b", ["mine-too"])
    hot.place_queues([("ns.a", "ns", "a"), ("ns.b", "ns", "b")] + [(f"other{n}", None, None) for n in range(20)])
    assert hot.take(("ns", None), "g", 1)[0] == ["mine", "mine-too"]
