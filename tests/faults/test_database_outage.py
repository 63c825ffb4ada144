"""PostgreSQL stopped abruptly (immediate shutdown) for ~10 s during load, then started again."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import psutil
import pytest

from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema
from tests.conftest import stop_process
from tests.faults.helpers import Bench, assert_clean, get, start_broker_on

OUTAGE_S = 10


def wait_for(check, seconds: float) -> float | None:
    """Seconds until check() held, or None."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.2)
    return None


def health(url: str) -> int:
    try:
        return get(url, "/health").status_code
    except Exception:
        return 0


@pytest.fixture
def own_postgres(tmp_path):
    server = EmbeddedPostgres(tmp_path / "pgdata")
    url = server.start()
    asyncio.run(apply_schema(url))
    try:
        yield server, url
    finally:
        if server.started_here:
            server.stop(mode="immediate")


def test_an_outage_is_buffered_and_replayed(own_postgres, tmp_path):
    """One worker process: its spool keeps each partition's order across the outage."""
    outage(own_postgres, tmp_path, workers=1)


def test_an_outage_with_two_workers_keeps_partition_order(own_postgres, tmp_path):
    """Two workers spool into the node's one spool file and one replays it, in order."""
    outage(own_postgres, tmp_path, workers=2)


def db_errors(url: str) -> int:
    """Requests answered 503 (database unavailable), by the broker's own worker-metrics."""
    answer = get(url, "/api/v1/analytics/worker-metrics")
    return sum(point["dbErrors"] for point in answer.json()["timeSeries"]) if answer.status_code == 200 else 0


def outage(own_postgres, tmp_path, workers: int) -> None:
    server, database_url = own_postgres
    process, url = start_broker_on(database_url, workers=workers, log_path=tmp_path / "broker.log")
    bench = Bench(url, tmp_path, rate=1000, duration=16, lease=2, timeout=150)
    try:
        bench.wait_for_load()
        server.stop(mode="immediate")
        down_at = time.monotonic()
        assert wait_for(lambda: health(url) == 503, 10) is not None, "health did not turn 503"
        # liveness is the process's, not the database's
        alive = get(url, "/status")
        assert alive.status_code == 200 and alive.json() == {"status": "ok", "engine": "reginamq"}, alive.text
        # pops and acks need the database: a clear 503 (a push is spooled instead)
        pop = get(url, "/api/v1/pop/queue/outage-probe", wait="false")
        assert pop.status_code == 503, pop.text
        import httpx

        ack = httpx.post(f"{url}/api/v1/ack", json={"transactionId": "t", "partitionId": str(uuid.uuid4()),
                                                   "leaseId": str(uuid.uuid4()), "status": "completed"}, timeout=10)
        assert ack.status_code == 503, ack.text
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        server.start()
        back = wait_for(lambda: health(url) == 200, 30)
        assert back is not None, "the broker did not reconnect"
        code, output, results = bench.finish()
        # the answers 503 are in the processes' metrics, written once the database was back
        assert wait_for(lambda: db_errors(url) >= 2, 10) is not None, "worker-metrics did not count the 503s"
    finally:
        bench.stop()
        stop_process(process)
    print(f"workers={workers}: outage {OUTAGE_S} s; healthy again {back:.1f} s after the restart")
    assert results["stats"].get("push_buffered", 0) > 0, results["stats"]
    assert process.returncode == 0
    assert_clean(code, output, results)


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends(own_postgres, tmp_path):
    """Not a warning (and asyncpg's traceback) per request: one line when the database goes,
    one when it is back, with how many requests were answered 503 in between."""
    server, database_url = own_postgres
    log_path = tmp_path / "broker.log"
    process, url = start_broker_on(database_url, workers=1, log_path=log_path)
    refused = 7
    try:
        assert get(url, "/health").status_code == 200
        server.stop(mode="immediate")
        answers = [get(url, "/api/v1/pop/queue/outage-log", wait="false").status_code for _ in range(refused)]
        assert answers == [503] * refused
        server.start()
        assert wait_for(lambda: health(url) == 200, 30) is not None, "the broker did not reconnect"
        assert wait_for(lambda: "available again" in log_path.read_text(), 10) is not None
    finally:
        stop_process(process)
    text = log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
    warnings = [line for line in text.splitlines() if " WARNING " in line]
    assert len(warnings) == 2, "\n".join(warnings)
    assert re.search(r"WARNING reginamq\.broker: database unavailable in process \d+ \(.+\): requests that need "
                     r"it are answered 503 and pushes are spooled on disk until it is back$", warnings[0]), warnings
    assert re.search(rf"WARNING reginamq\.broker: database available again in process \d+ after [\d.]+ s; "
                     rf"{refused} request\(s\) were answered 503 meanwhile$", warnings[1]), warnings


def test_a_worker_restarted_during_an_outage_serves_and_the_broker_stays_up(own_postgres, tmp_path):
    """A worker cannot open its connections while the database is away; it starts all the same
    (granian would otherwise respawn it in a loop and then stop the whole broker)."""
    server, database_url = own_postgres
    log_path = tmp_path / "broker.log"
    process, url = start_broker_on(database_url, workers=2, log_path=log_path)
    try:
        server.stop(mode="immediate")
        victim = psutil.Process(process.pid).children()[0]
        victim.kill()
        victim.wait(10)

        def respawned_and_started() -> bool:
            workers = [child.pid for child in psutil.Process(process.pid).children()]
            return any(f"database unavailable in process {pid} " in log_path.read_text()
                       for pid in workers if pid != victim.pid)

        assert wait_for(respawned_and_started, 30) is not None, log_path.read_text()[-4000:]
        assert process.poll() is None
        assert [get(url, "/api/v1/pop/queue/respawn-probe").status_code for _ in range(10)] == [503] * 10
        server.start()
        assert wait_for(lambda: health(url) == 200, 30) is not None, "the broker did not reconnect"
        # new connections each, spread over both workers: every one is served
        assert wait_for(lambda: all(get(url, "/api/v1/pop/queue/respawn-probe").status_code == 204
                                    for _ in range(20)), 30) is not None
    finally:
        stop_process(process)
    assert process.returncode == 0
