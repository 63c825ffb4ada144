"""A consumer that crashes mid-batch: pops, never acks, goes away."""

from __future__ import annotations

from tests.faults.helpers import Bench, assert_clean


def test_an_abandoned_batch_comes_back_after_the_lease_in_order(broker, tmp_path):
    _process, url = broker
    # every 15th pop a consumer drops its batch unacked and restarts as a new consumer
    bench = Bench(url, tmp_path, "--crash-after-pops", "15", rate=1000, duration=8, lease=2)
    try:
        code, output, results = bench.finish()
    finally:
        bench.stop()
    counts = assert_clean(code, output, results)
    assert results["stats"]["consumer_crashes"] >= 3
    # the abandoned messages were delivered again (after the 2 s lease), to another consumer
    assert counts["dup_lease"] > 0
    assert counts["redelivered_elsewhere"] > 0
