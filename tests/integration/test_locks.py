"""Locks and semaphores over raw HTTP (POST /api/v1/locks): permits with a lifetime and a
fencing token, verdicts as 200s, and the guard a transaction commits under."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.conftest import eventually
from tests.integration.helpers import post_operations


@pytest.fixture
def name() -> str:
    return f"lock-{uuid.uuid4().hex[:10]}"


async def one(http, op: dict) -> dict:
    return (await post_operations(http, "/api/v1/locks", [op]))[0]


def acquire(name, owner, ttl=30, **extra) -> dict:
    return {"op": "acquire", "name": name, "owner": owner, "ttlSeconds": ttl, **extra}


async def test_one_holder_at_a_time_and_a_retried_acquire_answers_the_same_permit(http, name):
    first = await one(http, acquire(name, "alice"))
    assert first["acquired"] is True and first["slot"] == 0 and first["owner"] == "alice"
    assert first["guard"] == {"op": "check", "ns": "queen-locks", "key": f"{name}#0", "expect": first["token"],
                              "required": True}
    again = await one(http, acquire(name, "alice"))
    assert again["acquired"] is True and again["already"] is True and again["token"] == first["token"]
    other = await one(http, acquire(name, "bob"))
    assert other["acquired"] is False and other["reason"] == "held"
    assert [(h["slot"], h["owner"], h["token"]) for h in other["holders"]] == [(0, "alice", first["token"])]


async def test_concurrent_acquires_grant_exactly_the_semaphores_permits(http, name):
    results = await asyncio.gather(*(one(http, acquire(name, f"w{n}", limit=3)) for n in range(10)))
    granted = [r for r in results if r["acquired"]]
    assert sorted(r["slot"] for r in granted) == [0, 1, 2]
    got = await one(http, {"op": "get", "name": name})
    assert got["held"] is True and sorted(h["owner"] for h in got["holders"]) == sorted(r["owner"] for r in granted)


async def test_renew_moves_the_token_and_the_old_one_stops_working(http, name):
    held = await one(http, acquire(name, "alice"))
    renewed = await one(http, {"op": "renew", "name": name, "token": held["token"], "ttlSeconds": 30})
    assert renewed["renewed"] is True and renewed["token"] != held["token"] and renewed["slot"] == 0
    stale = await one(http, {"op": "release", "name": name, "token": held["token"]})
    assert stale["released"] is False and stale["reason"] == "lost"
    # a renew sent again by its owner after its answer was lost still finds the permit
    resent = await one(http, {"op": "renew", "name": name, "token": held["token"], "owner": "alice",
                              "ttlSeconds": 30})
    assert resent["renewed"] is True
    lost = await one(http, {"op": "renew", "name": name, "token": held["token"], "owner": "bob", "ttlSeconds": 30})
    assert lost["renewed"] is False and lost["reason"] == "lost" and lost["holders"][0]["owner"] == "alice"
    released = await one(http, {"op": "release", "name": name, "token": resent["token"]})
    assert released["released"] is True
    assert (await one(http, {"op": "get", "name": name})) == {"index": 0, "op": "get", "name": name,
                                                             "holders": [], "held": False}


async def test_an_expired_permit_goes_to_the_next_holder_and_fences_the_old_one(http, name, queue):
    old = await one(http, acquire(name, "alice", ttl=1))

    async def taken_over():  # once alice's second is over
        answer = await one(http, acquire(name, "bob"))
        return answer if answer["acquired"] else None

    new = await eventually(taken_over)
    assert new and new["acquired"] is True and new["token"] != old["token"]
    renew = await one(http, {"op": "renew", "name": name, "token": old["token"], "ttlSeconds": 5})
    assert renew["renewed"] is False
    step = {"operations": [{"type": "push", "items": [{"queue": queue, "payload": "from alice"}]}],
            "kv": [old["guard"]]}
    answer = (await http.post("/api/v1/transaction", json=step)).json()
    assert answer["success"] is False and answer["reason"] == "kv_precondition" and answer["failedIndex"] == 1
    assert answer["value"]["owner"] == "bob"
    assert (await http.get(f"/api/v1/pop/queue/{queue}")).status_code == 204
    mine = (await http.post("/api/v1/transaction", json={**step, "kv": [new["guard"]]})).json()
    assert mine["success"] is True


@pytest.mark.parametrize("op", [
    {"op": "acquire", "name": "a#b", "ttlSeconds": 5},
    {"op": "acquire", "name": "", "ttlSeconds": 5},
    {"op": "acquire", "name": "n" * 257, "ttlSeconds": 5},
    {"op": "acquire", "name": "n", "ttlSeconds": 0},
    {"op": "acquire", "name": "n"},
    {"op": "acquire", "name": "n", "ttlSeconds": 5, "limit": 0},
    {"op": "acquire", "name": "n", "ttlSeconds": 5, "limit": 1025},
    {"op": "acquire", "name": "n", "ttlSeconds": 5, "owner": "a\u0001"},
    {"op": "renew", "name": "n", "ttlSeconds": 5},
    {"op": "release", "name": "n", "token": 0},
    {"op": "release", "name": "n", "token": 3, "slot": -1},
    {"op": "steal", "name": "n"},
])
async def test_bad_ops_are_a_400_and_nothing_runs(http, name, op):
    response = await http.post("/api/v1/locks", json={"operations": [acquire(name, "alice"), op]})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "lock_bad_request" and "index 1" in response.json()["detail"]
    assert (await one(http, {"op": "get", "name": name}))["held"] is False
