"""Per-process sweep state of a reader: one pop sweeps at a time, pauses after empty sweeps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reginamq.engine import pop
from reginamq.engine.pop import MAX_SWEEP_PAUSE, SWEEP_PAUSE, SweepPositions

KEY = ("q", None, None, "__QUEUE_MODE__")
SINCE = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture
def now(monkeypatch) -> list[float]:
    clock = [100.0]
    monkeypatch.setattr(pop.time, "monotonic", lambda: clock[0])
    return clock


def test_concurrent_pops_of_a_reader_do_not_sweep_the_same_windows(now):
    sweeps = SweepPositions()
    assert sweeps.position(KEY, SINCE)[1] is True
    # a second pop while the first one's sweep is under way: it does not sweep
    assert sweeps.position(KEY, SINCE)[1] is False
    assert sweeps.position((*KEY[:3], "other group"), SINCE)[1] is True  # another reader does
    sweeps.record(KEY, (1, "p-000100"), True, SINCE)  # the sweep found work: the next may go on
    sweeps.release(KEY)
    position, may_sweep = sweeps.position(KEY, SINCE)
    assert (position, may_sweep) == ((1, "p-000100"), True)


def test_a_pop_that_did_not_sweep_lets_the_next_one_sweep(now):
    """A pop allowed to sweep may not need to (its hints held work): releasing it is enough."""
    sweeps = SweepPositions()
    assert sweeps.position(KEY, SINCE)[1] is True
    sweeps.record(KEY, (None, None), None, SINCE)
    sweeps.release(KEY)
    assert sweeps.position(KEY, SINCE)[1] is True


def test_empty_sweeps_pause_longer_each_time_until_the_hints_begin_again(now):
    sweeps = SweepPositions()
    pauses = []
    for _ in range(6):
        assert sweeps.position(KEY, SINCE)[1] is True
        sweeps.record(KEY, (None, None), False, SINCE)
        sweeps.release(KEY)
        started = now[0]
        while not sweeps.position(KEY, SINCE)[1]:
            now[0] += 0.25
        pauses.append(now[0] - started)
        sweeps.record(KEY, (None, None), False, SINCE)  # the probe above was let sweep: nothing
        sweeps.release(KEY)
        now[0] += MAX_SWEEP_PAUSE
    assert pauses[0] == SWEEP_PAUSE and pauses[-1] == MAX_SWEEP_PAUSE
    assert pauses == sorted(pauses)
    sweeps.record(KEY, (None, None), False, SINCE)
    sweeps.release(KEY)
    assert sweeps.position(KEY, SINCE)[1] is False
    assert sweeps.position(KEY, datetime(2026, 12, 1, tzinfo=UTC))[1] is True  # hints began again


def test_a_reader_whose_pop_matched_no_queue_rests_until_it_has_hints(now):
    """A consumer started before its queue exists: its pops pause like empty sweeps, and sweep
    again at once when hints come (a queue has come to exist), until a pop finds a queue."""
    sweeps = SweepPositions()
    assert sweeps.position(KEY, SINCE)[1] is True
    sweeps.record(KEY, (None, None), False, SINCE, nothing_there=True)
    sweeps.release(KEY)
    assert sweeps.nothing_there(KEY)
    assert not sweeps.due(KEY)
    assert sweeps.position(KEY, SINCE)[1] is False
    assert sweeps.position(KEY, SINCE, hinted=True)[1] is True
    sweeps.record(KEY, (None, None), False, SINCE)  # that sweep read a queue and found nothing
    sweeps.release(KEY)
    assert not sweeps.nothing_there(KEY)
    assert sweeps.position(KEY, SINCE, hinted=True)[1] is False  # an ordinary pause: hints do not end it
