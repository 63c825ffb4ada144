"""kill -9 of one of the broker's two worker processes every few seconds during load.

The victim is always the older worker, once it has lived over 6 s: granian gives up (the whole
broker exits, "Worker crash loop detected") when a worker dies within 5.5 s of being respawned
(``kill_the_older_worker``). So the kills alternate between the two workers."""

from __future__ import annotations

from tests.conftest import wait_until
from tests.faults.helpers import Bench, assert_clean, get, kill_the_older_worker, workers_of


def test_kill9_of_a_worker_loses_nothing(broker, tmp_path):
    process, url = broker
    bench = Bench(url, tmp_path, rate=2000, duration=13, lease=2)
    killed = []
    try:
        bench.wait_for_load()
        while bench.elapsed() < 15 and len(killed) < 3:
            killed.append(kill_the_older_worker(process))
        code, output, results = bench.finish()
    finally:
        bench.stop()
    counts = assert_clean(code, output, results)
    assert len(set(killed)) >= 3  # three workers, each killed once
    # granian respawned the killed workers: the broker still has two and answers
    assert wait_until(lambda: len(workers_of(process.pid)) == 2, 20)
    assert get(url, "/health").status_code == 200
    print(f"killed workers {killed}; counters {counts}")
