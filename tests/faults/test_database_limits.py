"""The database refuses work: a statement timeout, and a database that turns read-only (the
portable stand-in for "out of disk"). Every answer must be a clear 4xx/503 with {"error": ...}
(never a 500, never a hang), nothing half-written may remain, and the broker must recover
once the database accepts work again."""

from __future__ import annotations

import asyncio
import time
import uuid
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from tests.conftest import create_database, start_broker, stop_process

OK = {200, 201, 204}


async def admin(database_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def kick_connections(database_url: str, name: str) -> None:
    """Terminate the broker's sessions so that its pool reconnects with the database's settings."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
    finally:
        await conn.close()


async def offsets_agree(url: str, queue: str) -> tuple[int, int]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            """SELECT (SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0) FROM rq_segments s
                         JOIN rq_partitions p ON p.id = s.partition_id JOIN rq_queues q ON q.id = p.queue_id
                        WHERE q.name = $1) AS stored,
                      (SELECT coalesce(sum(p.last_offset + 1 - p.log_start), 0) FROM rq_partitions p
                         JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1) AS counted""", queue)
        return row["stored"], row["counted"]
    finally:
        await conn.close()


@pytest.fixture
def fresh_database(database_url):
    """A database of this test alone, schema applied: (name, url)."""
    url = create_database(database_url, "limits")
    name = urlsplit(url).path.lstrip("/")
    try:
        yield name, url
    finally:
        asyncio.run(kick_connections(database_url, name))
        asyncio.run(admin(database_url, f"DROP DATABASE IF EXISTS {name}"))


@pytest.fixture
def limited_broker(fresh_database, tmp_path):
    name, url = fresh_database
    log_path = tmp_path / "broker.log"
    process, broker = start_broker(url, workers=1, log_path=log_path)
    try:
        yield name, url, broker, log_path
    finally:
        stop_process(process)


def exercise(client: httpx.Client, queue: str) -> list[httpx.Response]:
    """Push (a large batch, so a 1 ms timeout surely fires), pop and ack once each."""
    responses = [client.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"i": i, "pad": "x" * 200}}
                                                            for i in range(3000)]})]
    pop = client.get(f"/api/v1/pop/queue/{queue}", params={"batch": 2000, "wait": "false"})
    responses.append(pop)
    if pop.status_code == 200:
        messages = pop.json()["messages"]
        responses.append(client.post("/api/v1/ack/batch", json={"consumerGroup": None, "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "completed"} for m in messages]}))
    return responses


def accepted(responses: list[httpx.Response]) -> int:
    """How many pushed items the broker took (queued, or buffered in its spool) during the fault."""
    count = 0
    for response in responses:
        if response.request.url.path == "/api/v1/push" and response.status_code == 201:
            statuses = {entry["status"] for entry in response.json()}
            assert statuses <= {"queued", "buffered"}, statuses
            count += len(response.json())
    return count


def drain(client: httpx.Client, queue: str, expected: int) -> list:
    """Pop and complete until `expected` messages came (spooled pushes replay in the background)."""
    seen: list = []
    deadline = time.monotonic() + 60
    while len(seen) < expected and time.monotonic() < deadline:
        pop = client.get(f"/api/v1/pop/queue/{queue}", params={"batch": 10000, "wait": "false"})
        assert pop.status_code in (200, 204, 503), pop.text  # 503: a pooled connection we terminated
        if pop.status_code != 200:
            time.sleep(0.1)
            continue
        messages = pop.json()["messages"]
        seen += [m["data"] for m in messages]
        acked = client.post("/api/v1/ack/batch", json={"consumerGroup": None, "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "completed"} for m in messages]})
        assert acked.status_code == 200, acked.text
        assert all(entry["success"] for entry in acked.json()), acked.text
    return seen


def run_limited(database_url: str, limited_broker, setting: str) -> list[httpx.Response]:
    """Apply `setting` to the broker's database, exercise push/pop/ack, lift it, and check that
    nothing is half-written and that everything the broker accepted is delivered, once."""
    name, url, broker, _log_path = limited_broker
    queue = f"q-{uuid.uuid4().hex[:12]}"
    with httpx.Client(base_url=broker, timeout=30) as client:
        configured = client.post("/api/v1/configure", json={"queue": queue, "options": {"dedupWindowSeconds": 0}})
        assert configured.status_code == 200, configured.text
        assert client.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "before"}]}).status_code == 201

        asyncio.run(admin(database_url, f"ALTER DATABASE {name} SET {setting}"))
        asyncio.run(kick_connections(database_url, name))
        responses: list[httpx.Response] = []
        for _ in range(3):
            responses += exercise(client, queue)

        asyncio.run(admin(database_url, f"ALTER DATABASE {name} RESET {setting.split()[0]}"))
        asyncio.run(kick_connections(database_url, name))
        stored, counted = asyncio.run(offsets_agree(url, queue))
        assert stored == counted, f"segments hold {stored} messages, partitions count {counted}"

        pushed = client.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "after"}]})
        assert pushed.status_code == 201, pushed.text
        expected = 1 + accepted(responses) + 1
        # what a pop during the fault delivered and completed is not delivered again
        completed = sum(len(r.json()["messages"]) for r in responses
                        if r.request.url.path.startswith("/api/v1/pop") and r.status_code == 200)
        acks_ok = all(r.status_code == 200 for r in responses if r.request.url.path == "/api/v1/ack/batch")
        seen = drain(client, queue, expected - completed)
        if acks_ok:
            assert len(seen) == expected - completed, (len(seen), expected, completed)
        assert "after" in seen
        stored, counted = asyncio.run(offsets_agree(url, queue))
        assert stored == counted
    return responses


def assert_all_clear(responses: list[httpx.Response]) -> None:
    problems = [(r.request.method, r.request.url.path, r.status_code, r.text[:200]) for r in responses
                if not (r.status_code in OK or r.status_code == 503 or 400 <= r.status_code < 500)
                or (r.status_code not in OK and not r.json().get("error"))]
    assert not problems, problems


def test_statement_timeout_is_a_clear_refusal(database_url, limited_broker):
    responses = run_limited(database_url, limited_broker, "statement_timeout = '1ms'")
    assert_all_clear(responses)
    assert any(r.status_code not in OK or r.json()[0]["status"] == "buffered" for r in responses
               if r.request.url.path == "/api/v1/push"), "no push hit the 1 ms statement timeout"


def test_read_only_database_refuses_pushes_clearly(database_url, limited_broker):
    responses = run_limited(database_url, limited_broker, "default_transaction_read_only = on")
    pushes = [r for r in responses if r.request.url.path == "/api/v1/push"]
    assert_all_clear(responses)
    # refused, or taken into the spool (then delivered after recovery, checked above): never "queued"
    assert all(r.status_code not in OK or {e["status"] for e in r.json()} == {"buffered"} for r in pushes), \
        [(r.status_code, r.text[:200]) for r in pushes]
