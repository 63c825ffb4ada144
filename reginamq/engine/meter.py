"""This process's counters for the current minute: what the request path did, counted as it answers.

A few integer additions a request, nothing shared and nothing awaited, so counting costs the
request path nothing it would notice. The process metrics (maintenance/process_metrics.py) read
the counters into the minute's row and reset them when a minute is over; ``in_flight`` is a
gauge and carries over.
"""

from __future__ import annotations

from datetime import UTC, datetime


class Meter:
    """This process's counters for the current minute, fed by the request path."""

    __slots__ = (
        "ack_calls",
        "ack_failed",
        "ack_messages",
        "ack_requests",
        "db_errors",
        "dead_lettered",
        "empty_queries",
        "in_flight",
        "lag_count",
        "lag_max_ms",
        "lag_sum_ms",
        "pop_messages",
        "pop_queries",
        "pop_requests",
        "push_messages",
        "push_notices",
        "push_requests",
        "queues",
        "requests",
        "wakeups",
    )

    def __init__(self) -> None:
        self.in_flight = 0  # a gauge: it carries over from one minute to the next
        self.reset()

    def reset(self) -> None:
        self.push_messages = self.pop_messages = self.ack_messages = 0
        self.push_requests = self.pop_requests = self.ack_requests = self.requests = 0
        self.ack_failed = self.dead_lettered = self.db_errors = self.lag_count = 0
        self.pop_queries = self.empty_queries = self.wakeups = self.push_notices = self.ack_calls = 0
        self.lag_sum_ms = self.lag_max_ms = 0.0
        self.queues: dict[str, list] = {}  # queue -> [pops, lag_sum_ms, lag_max_ms]

    def pushed(self, messages: int) -> None:
        self.push_requests += 1
        self.push_messages += messages

    def acked(self, answers: list[dict]) -> None:
        """One ack request's per-item answers."""
        self.ack_requests += 1
        self.ack_messages += len(answers)
        for answer in answers:
            if not answer["success"]:
                self.ack_failed += 1
            elif answer.get("dlq"):
                self.dead_lettered += 1

    def cycled(self, answer: dict) -> None:
        """A committed streaming cycle: its sink pushes and its ack count as messages."""
        if not answer["success"]:
            return
        self.push_messages += len(answer["push_results"])
        if answer["ack_result"] is not None:
            self.ack_messages += 1
            self.dead_lettered += bool(answer["ack_result"]["dlq"])

    def transacted(self, results: list[dict]) -> None:
        """A committed transaction's flat results: its pushes and acks count as messages."""
        for result in results:
            if result["type"] == "push":
                self.push_messages += 1
            elif result["type"] == "ack":
                self.ack_messages += 1
                self.dead_lettered += bool(result.get("dlq"))

    def popped(self, queue: str, messages: int, oldest: datetime) -> None:
        """A pop that delivered; ``oldest`` is when its oldest message was pushed."""
        lag = max(0.0, (datetime.now(UTC) - oldest).total_seconds() * 1000)
        self.pop_requests += 1
        self.pop_messages += messages
        self.lag_count += 1
        self.lag_sum_ms += lag
        self.lag_max_ms = max(self.lag_max_ms, lag)
        entry = self.queues.get(queue)
        if entry is None:
            self.queues[queue] = [1, lag, lag]
        else:
            entry[0] += 1
            entry[1] += lag
            entry[2] = max(entry[2], lag)

    def empty_pop(self) -> None:
        self.pop_requests += 1

    def queried(self, found: bool) -> None:
        """A pop attempt that asked the database (a long poll may ask several times, or never)."""
        self.pop_queries += 1
        if not found:
            self.empty_queries += 1

    def woke(self, pops: int, heard: bool = True) -> None:
        """A push's announcement woke ``pops`` parked pops: heard, or (``heard`` False) about to
        be sent by this process, which woke its own pops first."""
        if heard:
            self.push_notices += 1
        self.wakeups += pops
