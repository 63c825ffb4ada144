"""The per-process counters and gauges behind /api/v1/analytics/system-metrics and /worker-metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reginamq.engine.meter import Meter
from reginamq.maintenance.process_metrics import Gauge


def test_a_gauge_keeps_avg_min_max_last():
    gauge = Gauge()
    assert gauge.as_json() == {"avg": 0, "min": 0, "max": 0, "last": 0}
    for value in (4, 0, 9, 3):
        gauge.add(value)
    assert gauge.as_json() == {"avg": 4.0, "min": 0, "max": 9, "last": 3}
    assert gauge.count == 4


def test_the_meter_counts_requests_messages_and_outcomes():
    meter = Meter()
    meter.pushed(100)
    meter.pushed(1)
    meter.acked([{"success": True, "dlq": False}, {"success": False, "dlq": False}, {"success": True, "dlq": True}])
    meter.transacted([{"type": "push"}, {"type": "push"}, {"type": "ack", "dlq": True}, {"type": "kv"},
                      {"type": "timer"}])
    meter.cycled({"success": True, "push_results": [{}, {}], "ack_result": {"dlq": False}})
    meter.cycled({"success": False, "push_results": [], "ack_result": None})  # rolled back: nothing
    meter.cycled({"success": True, "push_results": [], "ack_result": None})  # an idle flush
    meter.empty_pop()
    assert (meter.push_requests, meter.push_messages) == (2, 105)
    assert (meter.ack_requests, meter.ack_messages, meter.ack_failed, meter.dead_lettered) == (1, 5, 1, 2)
    assert (meter.pop_requests, meter.pop_messages) == (1, 0)


def test_the_meter_keeps_pop_lag_per_queue_and_resets_each_minute():
    meter = Meter()
    now = datetime.now(UTC)
    meter.popped("a", 10, now - timedelta(seconds=2))
    meter.popped("a", 5, now - timedelta(seconds=1))
    meter.popped("b", 1, now + timedelta(seconds=5))  # a clock ahead: no negative lag
    assert (meter.pop_requests, meter.pop_messages, meter.lag_count) == (3, 16, 3)
    pops, lag_sum, lag_max = meter.queues["a"]
    assert pops == 2 and 2_000 <= lag_max < 3_000 and 3_000 <= lag_sum < 5_000
    assert meter.queues["b"] == [1, 0.0, 0.0]
    meter.in_flight = 3
    meter.reset()
    assert meter.queues == {} and meter.pop_requests == 0 and meter.lag_max_ms == 0
    assert meter.in_flight == 3  # a gauge, not a count of the minute
