"""Payload encryption at rest, end to end: brokers with and without keys on one database,
the official client, and the bytes PostgreSQL actually holds."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import httpx
import pytest
from queen import Queen

from tests.conftest import ENCRYPTION_KEY, start_broker, stop_process

KEY, NEW_KEY = ENCRYPTION_KEY, os.urandom(32).hex()
MARKER = "card-4111-1111-1111-1111"


@pytest.fixture
async def keyed(keyed_broker):
    async with httpx.AsyncClient(base_url=keyed_broker, timeout=30) as client:
        yield client


def encrypted_queue() -> str:
    return f"enc-{uuid.uuid4().hex[:10]}"


async def stored_bytes(db, queue: str) -> bytes:
    rows = await db.fetch(
        "SELECT unnest(s.payloads) AS fragment FROM rq_segments s JOIN rq_partitions p ON p.id = s.partition_id "
        "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1 ORDER BY s.base_offset", queue)
    return b"".join(row["fragment"] for row in rows)


async def test_client_round_trip_with_nothing_readable_at_rest(keyed_broker, keyed, db):
    queue = encrypted_queue()
    queen = Queen(keyed_broker)
    try:
        await queen.queue(queue).config({"encryption_enabled": True}).create()
        await queen.queue(queue).push({"data": {"card": MARKER}, "transactionId": "pay-1"})
        [message] = await queen.queue(queue).batch(10).wait(False).pop()
        assert message["data"] == {"card": MARKER} and message["transactionId"] == "pay-1"
    finally:
        await queen.close()
    stored = await stored_bytes(db, queue)
    assert stored and MARKER.encode() not in stored and b"pay-1" not in stored
    # the browse route shows the payload to an operator
    page = (await keyed.get("/api/v1/messages", params={"queue": queue})).json()
    assert page["messages"][0]["data"] == {"card": MARKER}


async def test_dead_letters_stay_sealed_and_replay_sealed(keyed, db):
    queue = encrypted_queue()
    await keyed.post("/api/v1/configure", json={"queue": queue, "options": {
        "encryptionEnabled": True, "retryLimit": 0, "retryDelay": 0}})
    assert (await keyed.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"card": MARKER}}]})
            ).status_code == 201
    [message] = (await keyed.get(f"/api/v1/pop/queue/{queue}")).json()["messages"]
    await keyed.post("/api/v1/ack", json={"transactionId": message["transactionId"], "partitionId":
                                          message["partitionId"], "leaseId": message["leaseId"],
                                          "status": "failed", "error": "declined"})
    dlq = (await keyed.get("/api/v1/dlq", params={"queue": queue})).json()
    assert dlq["total"] == 1 and dlq["messages"][0]["data"] == {"card": MARKER}
    [dead] = await db.fetch("SELECT payload FROM rq_dlq d JOIN rq_queues q ON q.id = d.queue_id WHERE q.name = $1",
                            queue)
    assert MARKER.encode() not in dead["payload"]

    assert (await keyed.post(f"/api/v1/dlq/{dlq['messages'][0]['id']}/replay")).status_code == 200
    [again] = (await keyed.get(f"/api/v1/pop/queue/{queue}")).json()["messages"]
    assert again["data"] == {"card": MARKER}
    assert MARKER.encode() not in await stored_bytes(db, queue)


async def test_a_broker_without_the_key_writes_nothing_and_reads_nothing(keyed, http, db):
    queue = encrypted_queue()
    await keyed.post("/api/v1/configure", json={"queue": queue, "options": {"encryptionEnabled": True}})
    await keyed.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"card": MARKER}}]})

    refused = await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"card": "plain"}}]})
    assert refused.status_code == 503 and refused.json()["code"] == "encryption_unavailable"
    assert b"plain" not in await stored_bytes(db, queue)
    unreadable = await http.get(f"/api/v1/pop/queue/{queue}")
    assert unreadable.status_code == 503 and MARKER not in unreadable.text

    no_key = await http.post("/api/v1/configure", json={"queue": encrypted_queue(),
                                                         "options": {"encryptionEnabled": True}})
    assert no_key.status_code == 400 and "REGINAMQ_ENCRYPTION_KEY" in no_key.json()["error"]


async def test_a_queue_encrypted_behind_the_brokers_back_is_still_never_written_in_plaintext(keyed, db):
    queue = encrypted_queue()
    assert (await keyed.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "before"}]})
            ).status_code == 201  # the broker now believes this queue is not encrypted
    await db.execute("UPDATE rq_queues SET options = options || '{\"encryptionEnabled\": true}' WHERE name = $1",
                     queue)
    assert (await keyed.post("/api/v1/push", json={"items": [{"queue": queue, "payload": MARKER}]})
            ).status_code == 201
    stored = await stored_bytes(db, queue)
    assert b"before" in stored and MARKER.encode() not in stored
    messages = (await keyed.get(f"/api/v1/pop/queue/{queue}", params={"batch": 10})).json()["messages"]
    assert [m["data"] for m in messages] == ["before", MARKER]


async def test_key_rotation_reads_old_messages_and_seals_new_ones_with_the_new_key(keyed, database_url, db):
    queue = encrypted_queue()
    await keyed.post("/api/v1/configure", json={"queue": queue, "options": {"encryptionEnabled": True}})
    await keyed.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "under-the-old-key"}]})

    process, url = start_broker(database_url, workers=1, extra_env={
        "REGINAMQ_ENCRYPTION_KEY": NEW_KEY, "REGINAMQ_ENCRYPTION_OLD_KEYS": KEY})
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as rotated:
            await rotated.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "under-the-new-key"}]})
            messages = (await rotated.get(f"/api/v1/pop/queue/{queue}", params={"batch": 10})).json()["messages"]
            assert [m["data"] for m in messages] == ["under-the-old-key", "under-the-new-key"]
    finally:
        stop_process(process)
    # the old-key-only broker cannot open what the new key sealed
    browse = await keyed.get("/api/v1/messages", params={"queue": queue})
    assert browse.status_code == 503 and "does not have" in browse.json()["error"]


def test_serve_refuses_a_malformed_key_without_printing_it(tmp_path):
    bad = "not-a-key-" + "x" * 54
    result = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--port", "1"],
                            env={**os.environ, "REGINAMQ_ENCRYPTION_KEY": bad, "REGINAMQ_DATA_DIR": str(tmp_path)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "REGINAMQ_ENCRYPTION_KEY" in result.stderr and bad not in result.stderr + result.stdout
