"""Push fusion under concurrency: every request gets its own, correct answer; order holds."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from urllib.parse import urlsplit

import h11
import httpx

from tests.conftest import broker_with_clean_log


async def burst_of_pushes(url: str, bodies: list[dict]) -> list[tuple[int, list]]:
    """POST each body to /api/v1/push over a connection of its own, opened beforehand, all the
    requests written in one go, so that they reach the broker together: an HTTP client preparing
    them one after the other spreads them over tens of milliseconds, long enough for a flush to
    end between two. Returns (status, decoded body) per request."""
    address = urlsplit(url)
    connections = [await asyncio.open_connection(address.hostname, address.port) for _ in bodies]
    clients = [h11.Connection(h11.CLIENT) for _ in bodies]
    requests = []
    for client, body in zip(clients, bodies, strict=True):
        content = json.dumps(body).encode()
        headers = [("Host", address.netloc), ("Content-Type", "application/json"),
                   ("Content-Length", str(len(content))), ("Connection", "close")]
        requests.append(client.send(h11.Request(method="POST", target="/api/v1/push", headers=headers))
                        + client.send(h11.Data(data=content)) + client.send(h11.EndOfMessage()))
    for (_reader, writer), request in zip(connections, requests, strict=True):
        writer.write(request)

    async def answer(client: h11.Connection, reader: asyncio.StreamReader) -> tuple[int, list]:
        status, content = 0, b""
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA:
                client.receive_data(await reader.read(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                content += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, json.loads(content)

    try:
        return await asyncio.gather(*(answer(client, reader)
                                      for client, (reader, _writer) in zip(clients, connections, strict=True)))
    finally:
        for _reader, writer in connections:
            writer.close()


async def test_concurrent_pushes_are_answered_each_with_their_own_items(broker_url):
    queue = f"fuse-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=broker_url, timeout=30,
                                 limits=httpx.Limits(max_connections=64)) as http:
        async def one(request_number: int):
            items = [{"queue": queue, "partition": f"p{request_number % 4}", "payload": {"r": request_number, "i": i},
                      "transactionId": f"r{request_number}-i{i}"} for i in range(20)]
            response = await http.post("/api/v1/push", json={"items": items})
            assert response.status_code == 201
            return request_number, response.json()

        answers = await asyncio.gather(*(one(n) for n in range(60)))
        for request_number, answer in answers:
            assert [a["transaction_id"] for a in answer] == [f"r{request_number}-i{i}" for i in range(20)]
            assert {a["status"] for a in answer} == {"queued"}
        ids = [a["message_id"] for _, answer in answers for a in answer]
        assert len(set(ids)) == len(ids) == 1200

        # the same transactionIds again, concurrently: every one is a duplicate of its original
        originals = {a["transaction_id"]: a["message_id"] for _, answer in answers for a in answer}
        again = await asyncio.gather(*(one(n) for n in range(60)))
        for _, answer in again:
            assert {a["status"] for a in answer} == {"duplicate"}
            assert all(a["message_id"] == originals[a["transaction_id"]] for a in answer)

        # each partition holds every request's items contiguously and in item order
        for partition in range(4):
            popped = await http.get(f"/api/v1/pop/queue/{queue}/partition/p{partition}",
                                    params={"batch": 1000, "autoAck": "true"})
            data = [m["data"] for m in popped.json()["messages"]]
            assert len(data) == 15 * 20
            for start in range(0, len(data), 20):
                chunk = data[start:start + 20]
                assert [d["i"] for d in chunk] == list(range(20))
                assert len({d["r"] for d in chunk}) == 1


async def test_same_transaction_id_in_concurrent_requests_is_stored_once(broker_url):
    queue = f"fuse-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as http:
        body = {"items": [{"queue": queue, "partition": "p", "payload": 1, "transactionId": "same"}]}
        answers = await asyncio.gather(*(http.post("/api/v1/push", json=body) for _ in range(10)))
        statuses = sorted(a.json()[0]["status"] for a in answers)
        assert statuses == ["duplicate"] * 9 + ["queued"]
        assert len({a.json()[0]["message_id"] for a in answers}) == 1
        popped = await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 100})
        assert len(popped.json()["messages"]) == 1


async def test_flushes_start_the_spacing_apart_and_what_arrives_meanwhile_shares_one_write(
        database_url, db, tmp_path):
    queue = f"fuse-{uuid.uuid4().hex[:8]}"

    def body(tag: str) -> dict:
        return {"items": [{"queue": queue, "partition": "p", "payload": {"tag": tag}, "transactionId": tag}]}

    spacing = {"REGINAMQ_PUSH_FLUSH_SPACING_MS": "1000"}
    with broker_with_clean_log(database_url, tmp_path / "broker.log", spacing) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            # one push after the other: nothing could join a write, so none waits for its turn
            started = time.monotonic()
            for n in range(5):
                assert (await http.post("/api/v1/push", json=body(f"s{n}"))).status_code == 201
            one_by_one = time.monotonic() - started
            # a burst: what finds a write just started waits for the next turn, all in one write
            started = time.monotonic()
            answers = await burst_of_pushes(url, [body(f"r{n}") for n in range(20)])
            burst = time.monotonic() - started
            popped = await http.get(f"/api/v1/pop/queue/{queue}/partition/p", params={"batch": 100, "autoAck": "true"})

    assert one_by_one < 0.9, f"five pushes one after the other took {one_by_one:.3f} s"
    assert [status for status, _ in answers] == [201] * 20
    assert all(items[0]["status"] == "queued" for _, items in answers)
    assert burst >= 0.8, f"the burst was written within {burst:.3f} s, not a turn later"
    writes = await db.fetch(
        "SELECT s.created_at, s.end_offset - s.base_offset + 1 AS messages FROM rq_segments s "
        "JOIN rq_partitions p ON p.id = s.partition_id JOIN rq_queues q ON q.id = p.queue_id "
        "WHERE q.name = $1 ORDER BY s.created_at", queue)
    assert [w["messages"] for w in writes[:5]] == [1] * 5  # one write each for the five
    # of the burst, a request that came alone went at once; the others waited for the turn, a
    # spacing after the last of the five (or after that lone one), and went in one write
    late = [w for w in writes[5:] if (w["created_at"] - writes[4]["created_at"]).total_seconds() >= 0.8]
    assert len(late) == 1 and late[0]["messages"] >= 2, [(w["created_at"], w["messages"]) for w in writes[5:]]
    tags = [m["data"]["tag"] for m in popped.json()["messages"]]
    assert tags[:5] == [f"s{n}" for n in range(5)] and sorted(tags[5:]) == sorted(f"r{n}" for n in range(20))


async def test_producers_that_wait_for_each_answer_are_not_held_to_one_push_per_spacing(
        database_url, db, tmp_path):
    """Eight producers, each on its own connection, each pushing only after its last answer:
    after the first round they come back together but nobody else will join them, so no write
    waits for its turn (the spacing is one second; six rounds held to it would take five)."""
    queue = f"fuse-{uuid.uuid4().hex[:8]}"
    producers, rounds = 8, 6
    spacing = {"REGINAMQ_PUSH_FLUSH_SPACING_MS": "1000"}
    with broker_with_clean_log(database_url, tmp_path / "broker.log", spacing) as url:
        clients = [httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=1))
                   for _ in range(producers)]
        try:
            await asyncio.gather(*(client.get("/health") for client in clients))

            async def produce(number: int, client: httpx.AsyncClient) -> list[int]:
                statuses = []
                for n in range(rounds):
                    item = {"queue": queue, "partition": f"p{number}", "payload": n,
                            "transactionId": f"{number}-{n}"}
                    statuses.append((await client.post("/api/v1/push", json={"items": [item]})).status_code)
                return statuses

            started = time.monotonic()
            statuses = await asyncio.gather(*(produce(number, client) for number, client in enumerate(clients)))
            elapsed = time.monotonic() - started
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    assert statuses == [[201] * rounds] * producers
    assert elapsed < 3.0, f"{producers} producers x {rounds} rounds took {elapsed:.2f} s"
    stored = await db.fetchval(
        "SELECT sum(s.end_offset - s.base_offset + 1) FROM rq_segments s "
        "JOIN rq_partitions p ON p.id = s.partition_id JOIN rq_queues q ON q.id = p.queue_id "
        "WHERE q.name = $1", queue)
    assert stored == producers * rounds
