"""The two doors compared on generated programs: Hypothesis writes a sequence of pushes (with
transaction ids that repeat), pops of a partition (queue mode or a group) and acknowledgements
of what was popped (completed, failed, retry, dlq; some twice), and the same program runs on a
fresh queue through HTTP and through the library. Everything each call answers (statuses,
payloads, delivery attempts, ack outcomes and errors) and what ends in the dead-letter queue
must be the same through both.

Only what does not depend on timing is asked: pops name their partition and never wait, leases
outlive the program, and failed messages come back at once (retryDelay 0).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reginamq.library import Message, QueueOptions
from tests.plane.driver import Plane
from tests.plane.helpers import pop_now

PARTITIONS = ("a", "b")
GROUPS = (None, "g")
OPTIONS = QueueOptions(lease_time=300, retry_limit=1, retry_delay=0)

push = st.tuples(st.just("push"), st.sampled_from(PARTITIONS),
                 st.lists(st.sampled_from(("t1", "t2", "t3", None)), min_size=1, max_size=4))
pop = st.tuples(st.just("pop"), st.sampled_from(PARTITIONS), st.sampled_from(GROUPS), st.integers(1, 4))
ack = st.tuples(st.just("ack"), st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
                st.sampled_from(("completed", "failed", "retry", "dlq")), st.booleans())
programs = st.lists(st.one_of(push, pop, ack), min_size=1, max_size=12)


async def run(plane: Plane, program: list[tuple]) -> list[Any]:
    """What ``program`` sees on a fresh queue through ``plane``, then that queue is deleted."""
    queue = f"diff-{uuid.uuid4().hex[:10]}"
    await plane.configure(queue, OPTIONS)
    seen: list[Any] = []
    held: list[Message] = []  # popped, not yet acknowledged
    pushed = 0
    try:
        for step in program:
            if step[0] == "push":
                _, partition, txids = step
                payloads = list(range(pushed, pushed + len(txids)))
                pushed += len(txids)
                results = await plane.push(queue, payloads, partition=partition, transaction_ids=txids)
                seen.append(("push", [result.status for result in results]))
            elif step[0] == "pop":
                _, partition, group, batch = step
                messages = await pop_now(plane, queue, partition=partition, group=group, batch=batch)
                held.extend(messages)
                seen.append(("pop", [(m.partition, m.consumer_group, m.data, m.delivery_attempt) for m in messages]))
            elif held:
                _, picks, status, keep = step
                chosen = list({id(message): message for message in (held[pick % len(held)] for pick in picks)}.values())
                results = await plane.ack(chosen, status, error="handler failed")
                seen.append(("ack", status, [(r.success, r.error, r.dlq, r.noop) for r in results]))
                if not keep:  # else acknowledged again by a later step: what a second ack answers
                    held = [message for message in held if message not in chosen]
        for group in GROUPS:
            page = await plane.dlq(queue, group=group, limit=1000)
            seen.append(("dlq", group, sorted((d.partition, d.data, d.retry_count, d.error_message)
                                              for d in page.messages)))
    finally:
        await plane.delete_queue(queue)
    return seen


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=programs)
async def test_a_program_sees_the_same_through_http_and_the_library(http_plane, plane_library, program):
    assert await run(http_plane, program) == await run(plane_library, program)
