"""The autopilot's sizing rules (engine/autopilot.py), without a broker."""

from __future__ import annotations

from reginamq.engine.autopilot import BUSY_WAIT_MS, MAX_BATCH, MAX_WIDTH, MIN_BATCH, Autopilot

LANE = ("orders", None, None, "billing")


def started(pilot: Autopilot, pops: int = 1) -> Autopilot:
    for _ in range(pops):
        pilot.begin(LANE)
    return pilot


def test_a_cold_lane_starts_wide_and_a_pinned_knob_is_never_changed():
    pilot = started(Autopilot())
    plan = pilot.plan(LANE, None, None, waiting_hints=0)
    assert plan.partitions == MAX_WIDTH and plan.batch == MIN_BATCH and plan.wait_ms == BUSY_WAIT_MS
    assert pilot.plan(LANE, 7, None, 0).batch == 7
    assert pilot.plan(LANE, None, 3, 0).partitions == 3


def test_the_width_shares_the_ready_partitions_among_the_lanes_pops():
    pilot = started(Autopilot(), pops=4)
    pilot.observe(LANE, claimed=0, waiting_hints=40, delivered=0, oldest_age=None, lease_id=None)
    assert pilot.plan(LANE, None, None, waiting_hints=40).partitions == 10
    for _ in range(3):
        pilot.end(LANE)
    assert pilot.plan(LANE, None, None, waiting_hints=40).partitions == 40
    assert pilot.plan(LANE, None, None, waiting_hints=5000).partitions == MAX_WIDTH


def test_the_width_narrows_when_work_thins_out_and_doubles_while_consumers_fall_behind():
    pilot = started(Autopilot())
    pilot.observe(LANE, claimed=1, waiting_hints=0, delivered=1, oldest_age=0.0, lease_id=None)
    for _ in range(20):
        pilot.observe(LANE, claimed=1, waiting_hints=0, delivered=1, oldest_age=0.0, lease_id=None)
    assert pilot.plan(LANE, None, None, waiting_hints=0).partitions == 1
    for _ in range(20):
        pilot.observe(LANE, claimed=1, waiting_hints=0, delivered=1, oldest_age=5.0, lease_id=None)
    assert pilot.plan(LANE, None, None, waiting_hints=0).partitions == 2
    assert pilot.plan(LANE, None, None, waiting_hints=0).partitions == 4


def test_the_batch_follows_how_fast_the_lanes_consumers_ack():
    pilot = started(Autopilot())
    pilot.observe(LANE, claimed=1, waiting_hints=0, delivered=100, oldest_age=0.0, lease_id="fast")
    assert pilot.awaiting_acks
    pilot.acked("fast", 100)  # acked at once: a consumer that drains thousands a second
    assert pilot.plan(LANE, None, None, 0).batch == MAX_BATCH
    assert not pilot.awaiting_acks
    pilot.acked("unknown-lease", 100)  # a lease another process handed out: no reading
    assert pilot.plan(LANE, None, None, 0).batch == MAX_BATCH
