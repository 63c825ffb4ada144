"""A Hypothesis state machine: one queue, one partition, queue mode, against a reference model.

The model follows docs/architecture.md ("How an ack travels") and docs/protocol.md ("Choices
where Queen's documentation is silent"): at most one live lease per (partition, group); a
`completed` batch moves the cursor past the span; `retry` redelivers from its first message
without charging the budget; `failed` charges the budget once per delivery and, once
`retryLimit` (1 here) failures were charged, dead-letters the failed messages; `dlq`
dead-letters now; lease expiry redelivers with `deliveryAttempt + 1` and no charge.
"""

from __future__ import annotations

import time
import uuid

import httpx
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

LEASE_SECONDS = 1
RETRY_LIMIT = 1
SAFE_LIVE = 0.7  # seconds after sending a pop during which its lease is surely live
SAFE_EXPIRED = 1.15  # seconds after its answer after which its lease has surely expired
MAX_EXPIRIES = 2  # lease-expiry sleeps per example, to keep the file fast


def build_machine(url: str) -> type[RuleBasedStateMachine]:
    class QueueModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.client = httpx.Client(base_url=url, timeout=30)
            self.queue = f"sm-{uuid.uuid4().hex[:12]}"
            # reference model
            self.messages: list[int] = []  # payloads by offset
            self.committed = -1  # every offset <= committed is done (consumed or dead-lettered)
            self.last_delivered = -1
            self.attempts = 0
            self.retry_count = 0
            self.dlq = 0
            self.expiries = 0
            # the live lease: (span_start, span_end, sent_at, answered_at, messages)
            self.lease: tuple[int, int, float, float, list[dict]] | None = None

        def teardown(self) -> None:
            self.client.delete(f"/api/v1/resources/queues/{self.queue}")
            self.client.close()

        def check(self, response: httpx.Response, *expected: int) -> httpx.Response:
            assert response.status_code < 500, response.text
            assert response.status_code in expected, (response.status_code, response.text)
            return response

        @initialize()
        def configure(self) -> None:
            options = {"leaseTime": LEASE_SECONDS, "retryLimit": RETRY_LIMIT, "dedupWindowSeconds": 0, "retryDelay": 0,
                       "deadLetterQueue": True, "dlqAfterMaxRetries": True}
            self.check(self.client.post("/api/v1/configure", json={"queue": self.queue, "options": options}), 200)

        # -- helpers over the lease's timing ------------------------------------------------
        def lease_state(self) -> str:
            """'none', 'live' (surely), 'expired' (surely) or 'unsure'."""
            if self.lease is None:
                return "none"
            now = time.monotonic()
            if now - self.lease[2] < SAFE_LIVE:
                return "live"
            if now - self.lease[3] > SAFE_EXPIRED:
                return "expired"
            return "unsure"

        def wait_expired(self) -> None:
            assert self.lease is not None
            remaining = self.lease[3] + SAFE_EXPIRED - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            self.lease = None  # the span stays deliverable again; nothing charged

        # -- rules ----------------------------------------------------------------------------
        @rule(n=st.integers(1, 4))
        def push(self, n: int) -> None:
            start = len(self.messages)
            items = [{"queue": self.queue, "payload": start + i} for i in range(n)]
            body = self.check(self.client.post("/api/v1/push", json={"items": items}), 201).json()
            assert [entry["status"] for entry in body] == ["queued"] * n, body
            self.messages.extend(start + i for i in range(n))

        @rule(batch=st.integers(1, 5))
        def pop(self, batch: int) -> None:
            state = self.lease_state()
            if state == "unsure":
                self.wait_expired()
                state = "expired"
            if state == "expired":
                self.lease = None
            sent = time.monotonic()
            response = self.client.get(f"/api/v1/pop/queue/{self.queue}",
                                       params={"batch": batch, "leaseSeconds": LEASE_SECONDS, "wait": "false"})
            answered = time.monotonic()
            start = self.committed + 1
            end = min(len(self.messages) - 1, start + batch - 1)
            if self.lease is not None or end < start:
                self.check(response, 204)
                return
            self.check(response, 200)
            messages = response.json()["messages"]
            assert [m["data"] for m in messages] == self.messages[start:end + 1]
            attempt = self.attempts + 1 if start <= self.last_delivered else 1
            assert [m["deliveryAttempt"] for m in messages] == [attempt] * len(messages)
            self.attempts = attempt
            self.last_delivered = max(self.last_delivered, end)
            self.lease = (start, end, sent, answered, messages)

        @precondition(lambda self: self.lease is not None)
        @rule(status=st.sampled_from(["completed", "retry", "failed", "dlq"]))
        def ack(self, status: str) -> None:
            if self.lease_state() != "live":
                self.wait_expired()  # too late to ack safely: let it expire instead
                return
            start, end, _, _, messages = self.lease
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": status} for m in messages]
            body = self.check(self.client.post("/api/v1/ack/batch",
                                               json={"consumerGroup": None, "acknowledgments": acks}), 200).json()
            assert all(entry["success"] for entry in body), body
            self.lease = None
            count = end - start + 1
            if status == "completed":
                self.committed, self.retry_count = end, 0
            elif status == "retry":
                pass
            elif status == "dlq" or self.retry_count >= RETRY_LIMIT:  # dlq, or failed with the budget spent
                self.committed, self.retry_count = end, 0
                self.dlq += count
            else:  # failed, budget charged once for this delivery
                self.retry_count += 1
            assert all(entry["dlq"] == (status == "dlq" or (status == "failed" and self.committed == end))
                       for entry in body), body

        @precondition(lambda self: self.lease is not None and self.expiries < MAX_EXPIRIES)
        @rule()
        def expire(self) -> None:
            self.expiries += 1
            self.wait_expired()

        @invariant()
        def dlq_total(self) -> None:
            response = self.check(self.client.get("/api/v1/dlq", params={"queue": self.queue, "limit": 1000}), 200)
            assert response.json()["total"] == self.dlq

    return QueueModel


def test_queue_mode_matches_the_model(broker_url):
    machine = build_machine(broker_url)
    run_state_machine_as_test(machine, settings=settings(max_examples=15, stateful_step_count=15, deadline=None))
