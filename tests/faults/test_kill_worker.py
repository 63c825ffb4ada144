"""kill -9 of one of the broker's two worker processes every few seconds during load.

The victim is always the older worker: granian gives up (the whole broker exits, "Worker crash
loop detected") when a worker dies within 5.5 s of being respawned, so a kill every 4 s
alternates between the two workers and each lives at least 8 s."""

from __future__ import annotations

import os
import signal
import time

import psutil

from tests.faults.helpers import Bench, assert_clean, get


def workers_of(pid: int) -> list[psutil.Process]:
    return [child for child in psutil.Process(pid).children() if child.is_running()]


def test_kill9_of_a_worker_loses_nothing(broker, tmp_path):
    process, url = broker
    bench = Bench(url, tmp_path, rate=2000, duration=13, lease=2)
    killed = []
    try:
        time.sleep(4)  # the bench starts its load ~2 s after it was launched
        while bench.elapsed() < 15 and len(killed) < 3:
            deadline = time.monotonic() + 15
            while not (workers := workers_of(process.pid)) and time.monotonic() < deadline:
                time.sleep(0.2)  # granian is respawning
            assert workers, "the broker has no worker left"
            victim = min(workers, key=lambda worker: worker.create_time())
            os.kill(victim.pid, signal.SIGKILL)  # a worker of the broker this test started
            killed.append(victim.pid)
            time.sleep(4)
        code, output, results = bench.finish()
    finally:
        bench.stop()
    counts = assert_clean(code, output, results)
    assert len(killed) >= 3
    # granian respawned the killed workers: the broker still has two and answers
    deadline = time.monotonic() + 20
    while len(workers_of(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers_of(process.pid)) == 2
    assert get(url, "/health").status_code == 200
    print(f"killed workers {killed}; counters {counts}")
