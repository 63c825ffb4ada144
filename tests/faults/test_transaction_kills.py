"""A broker worker killed (SIGKILL) at each step of a transaction over several member
databases, under a pipeline run (`reginamq bench --verify --pipeline-stages 3`, each stage's
acks and pushes in one `/transaction` whose partitions live on different members): the bench
finds nothing lost, reordered or invented, and nothing stays prepared past the recovery's bound
(docs/shards.md, "Transactions across members"). The kills land at exact steps through the
failpoints of store/two_phase.py (reginamq/common/failpoints.py)."""

from __future__ import annotations

import time

from reginamq.store.two_phase import IN_DOUBT_AFTER
from tests.conftest import create_database, stop_process, wait_until
from tests.faults.helpers import RESPAWN_GRACE_S, Bench, assert_clean, query, start_broker_on, workers_of

# Every step of TwoPhase._attempt a coordinator can die at, in the order it reaches them.
STEPS = ["prepare", "prepared-some", "decide", "commit", "committed-some", "answer"]


def prepared_anywhere(urls: list[str]) -> int:
    return sum(query(url, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()")[0][0]
               for url in urls)


def test_a_worker_killed_at_each_step_of_a_transaction_over_members_loses_nothing(database_url, tmp_path):
    urls = [create_database(database_url, "tx_kills") for _ in range(3)]
    armed = tmp_path / "failpoint"
    process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log",
                                   extra_env={"REGINAMQ_FAILPOINTS": str(armed)})
    bench = Bench(url, tmp_path, "--pipeline-stages", "3", rate=200, duration=50, lease=2, timeout=300)
    killed = []
    try:
        bench.wait_for_load()
        for step in STEPS:
            # a worker that dies within the grace of its respawn makes granian give up the broker
            wait_until(lambda: len(workers := workers_of(process.pid)) == 2 and
                       all(time.time() - worker.create_time() > RESPAWN_GRACE_S for worker in workers), 30)
            before = {worker.pid for worker in workers_of(process.pid)}
            armed.write_text(step)
            assert wait_until(lambda: not armed.exists(), 30), f"no transaction over two members reached {step}"
            assert wait_until(lambda before=before: {w.pid for w in workers_of(process.pid)} != before, 10)
            killed.append(step)
        code, output, results = bench.finish()
    finally:
        bench.stop()
        stop_process(process)
    assert killed == STEPS
    assert_clean(code, output, results)
    assert results["stats"].get("stage3_forwarded", 0) > 0, results["stats"]
    # what the killed coordinators left prepared was finished by the recovery (the bound, then a
    # round); the bench's drain may have outlasted it already
    assert wait_until(lambda: prepared_anywhere(urls) == 0, IN_DOUBT_AFTER + 30), "a transaction stayed prepared"
