"""The broker's PostgreSQL connections killed with pg_terminate_backend, repeatedly, during load."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.conftest import stop_process, wait_until
from tests.faults.helpers import Bench, assert_clean, get, start_broker_on

TERMINATE = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE application_name = 'reginamq' AND pid <> pg_backend_pid() AND datname = current_database()")



@pytest.mark.parametrize("workers", [1, 2])
def test_killed_backends_cost_only_retries(workers, database_url, tmp_path):
    process, url = start_broker_on(database_url, workers=workers, log_path=tmp_path / "broker.log")
    try:
        check(url, database_url, tmp_path)
    finally:
        stop_process(process)


def check(url: str, database_url: str, tmp_path) -> None:
    bench = Bench(url, tmp_path, rate=2000, duration=10, lease=2)

    async def kill_loop() -> int:
        conn = await asyncpg.connect(database_url)
        killed = 0
        try:
            while bench.elapsed() < 13:
                killed += await conn.fetchval(TERMINATE)
                await asyncio.sleep(0.7)  # the fault's cadence
        finally:
            await conn.close()
        return killed

    try:
        bench.wait_for_load()
        killed = asyncio.run(kill_loop())
        code, output, results = bench.finish()
    finally:
        bench.stop()
    stats = results["stats"]
    print(f"terminated {killed} backends; request stats {stats}")
    counts = assert_clean(code, output, results)
    assert killed >= 10
    # a 5xx or a lost answer may happen; each one was fixed by retrying it
    gave_up = {key: value for key, value in stats.items() if key.endswith("_gave_up")}
    assert not any(gave_up.values()), stats
    five_xx = sum(value for key, value in stats.items() if key.endswith("_5xx"))
    assert wait_until(lambda: get(url, "/health").status_code == 200, 10)  # reconnected after the last kill
    print(f"terminated {killed} backends; 5xx answers {five_xx} (all fixed by a retry); counters {counts}")
