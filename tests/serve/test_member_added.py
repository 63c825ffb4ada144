"""A member database added to a running deployment (`reginamq shards add`, docs/shards.md
"Adding a member"): the brokers given its URL serve it within a maintenance round without a
restart, new partitions take their share of it, nothing that existed moves or is lost, and a
broker not given its URL refuses to change queues without it."""

from __future__ import annotations

import uuid

import httpx

from reginamq.store.members import place
from tests.conftest import create_database, stop_process, wait_until
from tests.faults.helpers import (
    form_deployment,
    listening_on,
    partitions_on,
    query,
    shards_add,
    start_broker_on,
)


def configure(http: httpx.Client, queue: str, lease_time: int) -> httpx.Response:
    return http.post("/api/v1/configure", json={"queue": queue, "options": {"leaseTime": lease_time}})


def push(http: httpx.Client, queue: str, partitions: list[str]) -> None:
    answer = http.post("/api/v1/push", json={"items": [{"queue": queue, "partition": name, "payload": name}
                                                       for name in partitions]})
    assert answer.status_code == 201, answer.text
    assert all(item["status"] == "queued" for item in answer.json()), answer.text


def drain(http: httpx.Client, queue: str, expected: int) -> list[str]:
    """Pops (a wildcard pop of the queue, in queue mode) and acks until ``expected`` messages came."""
    seen: list[str] = []

    def popped_all() -> bool:
        answer = http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 50, "wait": "false"})
        if answer.status_code == 200:
            messages = answer.json()["messages"]
            seen.extend(message["data"] for message in messages)
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
                    for m in messages]
            assert all(r["success"] for r in http.post("/api/v1/ack/batch", json={"acknowledgments": acks}).json())
        return len(seen) >= expected

    wait_until(popped_all, seconds=60)
    return seen


def test_a_member_added_while_running_takes_new_partitions_and_moves_nothing(database_url, tmp_path):
    urls = [create_database(database_url, "grown") for _ in range(3)]
    # a deployment of two, formed by a broker that will not be given the third database's URL
    unaware, unaware_url = start_broker_on(" ".join(urls[:2]), workers=1, log_path=tmp_path / "unaware.log")
    process = None
    queue = f"grown-{uuid.uuid4().hex[:8]}"
    try:
        # the third database is given to this broker before it is a member: it waits to be added
        process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log")
        with httpx.Client(base_url=url, timeout=30) as http, httpx.Client(base_url=unaware_url, timeout=30) as other:
            assert configure(http, queue, 30).status_code == 200
            before = [f"old-{n}" for n in range(40)]
            push(http, queue, before)
            placed_before = [partitions_on(member, queue) for member in urls]
            assert placed_before[2] == set() and placed_before[0] | placed_before[1] == set(before)

            added = shards_add(urls[2], urls[:2])
            assert added.returncode == 0, added.stderr
            assert "added member 2" in added.stdout
            # the new member holds the queue with the catalog's id and options
            catalog_row = query(urls[0], "SELECT id, options FROM rq_queues WHERE name = $1", queue)
            assert query(urls[2], "SELECT id, options FROM rq_queues WHERE name = $1", queue) == catalog_row
            # each broker process given its URL listens on it: it serves it
            wait_until(lambda: listening_on(urls[2]) >= 2, seconds=30)

            ids = [row[0] for row in query(urls[0], "SELECT id FROM rq_members ORDER BY ordinal")]
            after = [f"new-{n}" for n in range(60)]
            push(http, queue, after)
            placed_after = [partitions_on(member, queue) for member in urls]
            # nothing moved; the new names went where placement over three members says
            for ordinal in (0, 1):
                assert placed_before[ordinal] <= placed_after[ordinal]
            assert placed_after[2] == {name for name in after if place(queue, name, ids) == 2}
            assert placed_after[2], "the new member took no new partition"
            assert sorted(drain(http, queue, 100)) == sorted(before + after)

            # a broker not given the new member's URL does not change queues without it
            refused = configure(other, queue, 60)
            assert refused.status_code == 503 and "member databases" in refused.text, refused.text
            assert configure(http, queue, 60).status_code == 200
            options = [query(member, "SELECT options->>'leaseTime' FROM rq_queues WHERE name = $1", queue)[0][0]
                       for member in urls]
            assert options == ["60", "60", "60"]
    finally:
        if process is not None:
            stop_process(process)
        stop_process(unaware)
    log = (tmp_path / "broker.log").read_text(errors="replace")
    assert "Traceback" not in log and "round failed" not in log, log[-4000:]
    assert "was not given its URL" in (tmp_path / "unaware.log").read_text(errors="replace")


def test_adding_a_database_that_holds_queues_is_refused(database_url):
    urls = [create_database(database_url, "refused") for _ in range(3)]
    form_deployment(urls[:2])
    query(urls[2], "SELECT rq_provision_queues(ARRAY['held'], '{}'::jsonb)")
    refused = shards_add(urls[2], urls[:2])
    assert refused.returncode == 1 and "holds queues" in refused.stderr, refused.stderr
    assert query(urls[0], "SELECT count(*) FROM rq_members")[0][0] == 2
    assert query(urls[2], "SELECT count(*) FROM rq_members")[0][0] == 0
