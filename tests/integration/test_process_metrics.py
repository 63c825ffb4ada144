"""Queen's per-process analytics: /api/v1/analytics/system-metrics and /worker-metrics.

The session's broker runs two worker processes writing their rows every 0.3 s
(REGINAMQ_MAINTENANCE_INTERVAL), so the figures of the traffic a test makes show up within a
second. Other brokers of the test session write to the same database; each test reads only
the processes of its own broker (found by port) or its own queue.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from tests.conftest import eventually
from tests.integration.helpers import ack, ack_batch, pop, pop_raw, push

COUNTED = ("pushMessages", "popMessages", "ackMessages", "pushRequests", "popRequests", "ackRequests",
           "ackFailed", "dlqCount", "jobsDone")


def port_of(http) -> int:
    return urlsplit(str(http.base_url)).port


async def get(http, path: str, **params) -> dict:
    response = await http.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def our_replicas(http) -> list[dict]:
    body = await get(http, "/api/v1/analytics/system-metrics")
    return [replica for replica in body["replicas"] if replica["port"] == port_of(http)]


async def counted(http, since: datetime) -> dict[str, int]:
    """The throughput counters of this broker's processes since ``since``, summed."""
    totals = dict.fromkeys(COUNTED, 0)
    for replica in await our_replicas(http):
        body = await get(http, "/api/v1/analytics/worker-metrics", workerId=replica["workerId"],
                         **{"from": since.isoformat()})
        for point in body["timeSeries"]:
            for key in COUNTED:
                totals[key] += point[key]
    return totals


async def test_every_worker_process_is_a_replica_with_its_gauges(http):
    replicas = await eventually(lambda: _two_replicas(http))
    assert replicas, "the broker's two worker processes never both reported"
    assert len({replica["workerId"] for replica in replicas}) == 2
    for replica in replicas:
        assert replica["hostname"]
        last = replica["timeSeries"][-1]
        assert datetime.fromisoformat(last["timestamp"]) > datetime.now(UTC) - timedelta(minutes=2)
        assert last["sampleCount"] >= 1
        metrics = last["metrics"]
        assert metrics["memory"]["rss_bytes"]["max"] > 10_000_000  # a Python process with its libraries
        assert metrics["database"]["pool_size"]["max"] >= 1
        assert set(metrics["cpu"]["user_us"]) == {"avg", "min", "max", "last"}
        assert metrics["uptime_seconds"] >= 0


async def _two_replicas(http):
    replicas = await our_replicas(http)
    return replicas if len(replicas) == 2 else None


async def test_filters_narrow_the_replicas(http):
    replicas = await eventually(lambda: _two_replicas(http))
    one = replicas[0]["workerId"]
    body = await get(http, "/api/v1/analytics/system-metrics", workerId=one)
    assert [replica["workerId"] for replica in body["replicas"]] == [one]
    assert body["replicaCount"] == 1
    body = await get(http, "/api/v1/analytics/system-metrics", hostname=f"nowhere-{uuid.uuid4().hex}")
    assert body["replicas"] == [] and body["replicaCount"] == 0
    long_ago = await get(http, "/api/v1/analytics/worker-metrics", **{"from": "2020-01-01T00:00:00Z",
                                                                      "to": "2020-01-02T00:00:00Z"})
    assert long_ago["timeSeries"] == [] and long_ago["pointCount"] == 0 and long_ago["bucketMinutes"] == 15
    assert long_ago["timeRange"] == {"from": "2020-01-01T00:00:00.000Z", "to": "2020-01-02T00:00:00.000Z"}


async def test_worker_metrics_count_the_traffic_and_the_pop_lag_per_queue(http, queue):
    since = datetime.now(UTC) - timedelta(minutes=30)
    await eventually(lambda: _two_replicas(http))
    before = await counted(http, since)
    await push(http, queue, *range(3), partition="a")
    await push(http, queue, 3, 4, partition="b")
    first = (await pop(http, queue, batch=3))["messages"]  # one partition each: the other is leased
    second = (await pop(http, queue, batch=3))["messages"]
    if len(first) == 2:
        first, second = second, first
    assert (await pop_raw(http, queue)).status_code == 204
    await ack_batch(http, first + second[:1])
    assert (await ack(http, second[1], "dlq", error="poison"))["dlq"] is True
    assert (await ack(http, second[1], "completed", leaseId=str(uuid.uuid4())))["success"] is False

    expected = {"pushMessages": 5, "pushRequests": 2, "popMessages": 5,
                "popRequests": 3,  # two that delivered, one empty
                "ackMessages": 6, "ackRequests": 3, "ackFailed": 1, "dlqCount": 1, "jobsDone": 7}

    async def grown():
        # each worker process flushes on its own clock: wait until both have counted their part
        now = await counted(http, since)
        delta = {key: now[key] - before[key] for key in COUNTED}
        return delta if all(delta[key] >= least for key, least in expected.items()) else None

    delta = await eventually(grown)
    assert delta, "the traffic never all showed up in worker-metrics"

    async def our_queue():
        body = await get(http, "/api/v1/analytics/worker-metrics")
        entries = [entry for entry in body["queues"] if entry["queueName"] == queue]
        return (body, entries[0]) if entries and entries[0]["popCount"] == 2 else None

    answer = await eventually(our_queue)
    assert answer, "the queue's two delivering pops never showed up in worker-metrics"
    body, ours = answer
    assert 0 <= ours["avgLagMs"] <= ours["maxLagMs"] < 60_000
    assert body["summary"]["totalPushMessages"] >= 5
    assert {worker["workerId"] for worker in body["workers"]} >= {
        int(replica["workerId"]) for replica in await our_replicas(http)}


async def pop_counts(http) -> dict[int, tuple[int, int, int]]:
    """Each process's push announcements heard, pops they woke and pop queries, summed over
    its minutes."""
    counts = {}
    for replica in await our_replicas(http):
        pops = [point["metrics"]["pops"] for point in replica["timeSeries"]]
        counts[replica["workerId"]] = tuple(sum(p[key] for p in pops)
                                            for key in ("push_notices", "woken_by_push", "queries"))
    return counts


async def test_a_parked_long_poll_is_seen_as_one_and_its_wake_up_is_counted(http, queue):
    waiting = asyncio.ensure_future(pop_raw(http, queue, wait=True, timeout=4000))

    async def parked():
        for replica in await our_replicas(http):
            requests = replica["timeSeries"][-1]["metrics"]["requests"]
            if requests["parked_pops"]["max"] >= 1 and requests["in_flight"]["max"] >= 1:
                return True
        return False

    try:
        assert await eventually(parked, seconds=4), "no process reported the parked pop"
        before = await pop_counts(http)
    finally:
        await push(http, queue, "wake")
        assert (await waiting).status_code == 200

    async def counted_the_wake_up():
        """Every process heard the push; the one holding the poll woke it and asked the database."""
        after = await pop_counts(http)
        grew = [tuple(a > b for a, b in zip(after[pid], before[pid], strict=True)) for pid in before if pid in after]
        return (len(grew) == len(before) and all(notices for notices, _, _ in grew)
                and any(woken and queried for _, woken, queried in grew))

    assert await eventually(counted_the_wake_up, seconds=4), "the wake-up was not counted"


@pytest.mark.parametrize("params", [
    {"workerId": "abc"}, {"workerId": "-1"}, {"from": "yesterday"},
    {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
    {"from": "2020-01-01T00:00:00Z", "to": "2020-03-01T00:00:00Z"}, {"hostname": "h" * 256},
])
@pytest.mark.parametrize("path", ["/api/v1/analytics/system-metrics", "/api/v1/analytics/worker-metrics"])
async def test_bad_filters_are_400(http, path, params):
    response = await http.get(path, params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


async def test_rows_older_than_a_week_are_purged_by_the_stats_loop(http, db):
    old, recent = datetime.now(UTC) - timedelta(days=8), datetime.now(UTC) - timedelta(days=6)
    host = f"gone-{uuid.uuid4().hex[:8]}"
    for bucket in (old, recent):
        await db.execute(
            "INSERT INTO rq_process_metrics SELECT $1, $2, 1, 1, 1, '{}', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
            " 0, 0, 0, 0, 0, 0, 0, '{}'", bucket.replace(second=0, microsecond=0), host)

    async def purged():
        rows = await db.fetch("SELECT bucket FROM rq_process_metrics WHERE hostname = $1", host)
        return rows if len(rows) == 1 else None

    rows = await eventually(purged)
    assert rows and rows[0]["bucket"] == recent.replace(second=0, microsecond=0)


async def test_ephemeral_pops_count_with_their_lag(http):
    queue = f"eph-{uuid.uuid4().hex[:12]}"
    since = datetime.now(UTC) - timedelta(minutes=30)
    await eventually(lambda: _two_replicas(http))
    before = await counted(http, since)
    response = await http.post("/api/v1/ephemeral/push", json={"queue": queue, "messages": [
        {"payload": {"n": n}} for n in range(3)]})
    assert response.status_code == 201, response.text
    await asyncio.sleep(0.3)  # the pop lag is at least this
    for batch, expected in ((2, 2), (2, 1), (2, 0)):
        response = await http.get("/api/v1/ephemeral/pop", params={"queue": queue, "batch": batch, "autoAck": "true"})
        assert response.status_code == 200, response.text
        assert len(response.json()["messages"]) == expected

    async def grown():
        body = await get(http, "/api/v1/analytics/worker-metrics")
        entries = [entry for entry in body["queues"] if entry["queueName"] == queue]
        return entries[0] if entries and entries[0]["popCount"] == 2 else None

    ours = await eventually(grown)
    assert ours, "the ephemeral pops never showed up in worker-metrics"
    assert 300 <= ours["avgLagMs"] <= ours["maxLagMs"] < 60_000

    async def all_three_pops_counted():
        # the two worker processes flush on their own clocks: the empty pop may be counted later
        delta = {key: value - before[key] for key, value in (await counted(http, since)).items()}
        return delta if delta["popRequests"] >= 3 else None

    delta = await eventually(all_three_pops_counted)
    assert delta, "the three pop requests never all showed up in the per-process counters"
    assert delta["popMessages"] >= 3 and delta["pushMessages"] >= 3
