"""kill -9 of the broker's worker processes while they fire timers: every timer is delivered
exactly once (a fire round deletes its timers and pushes their messages in one transaction, so
a round cut short by the kill rolls back and another process fires it)."""

from __future__ import annotations

import base64
import json
import time
import uuid

import httpx

from tests.conftest import wait_until
from tests.faults.helpers import kill_the_older_worker

TIMERS = 2000
SPREAD_MS = 8000


def test_kill9_of_workers_while_timers_fire_delivers_each_timer_once(broker):
    process, url = broker
    queue = f"timers-{uuid.uuid4().hex[:8]}"
    txns = [str(uuid.uuid4()) for _ in range(TIMERS)]
    with httpx.Client(base_url=url, timeout=30) as http:
        for first in range(0, TIMERS, 100):
            operations = [{"op": "schedule", "queue": queue, "timerKey": f"t{n}", "txn": txns[n],
                           "delayMs": n * SPREAD_MS // TIMERS,
                           "payload": base64.b64encode(json.dumps({"n": n}).encode()).decode()}
                          for n in range(first, first + 100)]
            answer = http.post("/api/v1/timers", json={"operations": operations})
            assert answer.status_code == 200 and all(r["ok"] for r in answer.json()["results"]), answer.text

        def firing() -> bool:  # the first timer (due at once, first in key order) has fired
            rows = http.get(f"/api/v1/timers/{queue}", params={"limit": 1}).json()["rows"]
            return not rows or rows[0]["timerKey"] != "t0"

        assert wait_until(firing, SPREAD_MS / 1000)
        for _ in range(2):
            kill_the_older_worker(process)

        seen: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while len(seen) < TIMERS and time.monotonic() < deadline:
            try:
                answer = http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 1000, "autoAck": "true"})
            except httpx.TransportError:  # a worker being respawned
                time.sleep(0.2)
                continue
            if answer.status_code == 204:
                time.sleep(0.2)
                continue
            assert answer.status_code == 200, answer.text
            for message in answer.json()["messages"]:
                seen[message["transactionId"]] = seen.get(message["transactionId"], 0) + 1
        assert sorted(seen) == sorted(txns), f"{TIMERS - len(seen)} timers were not delivered"
        assert set(seen.values()) == {1}, "a timer was delivered twice"
        assert http.get(f"/api/v1/timers/{queue}").json()["rows"] == []
