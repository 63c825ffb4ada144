"""Leases: expiry redelivers, renewal keeps a lease, over HTTP and through the library
(ported from tests/conformance/test_client_leases.py)."""

from __future__ import annotations

import time

from reginamq.library import QueueOptions
from tests.conftest import lease_runs_out, outlast_lease
from tests.plane.helpers import pop_now, pop_until


async def test_lease_expiry_redelivers_the_batch_under_a_new_lease(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [0, 1, 2])
    first = await plane.pop(queue, batch=10)
    assert not await plane.pop(queue, batch=10)  # leased

    again = await pop_until(plane, queue)  # once the lease ran out

    assert [m.transaction_id for m in again] == [m.transaction_id for m in first.messages]
    assert {m.delivery_attempt for m in again} == {2}
    assert again[0].lease_id != first.lease_id


async def test_lease_expiry_does_not_charge_the_retry_budget(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1, retry_limit=0))
    await plane.push(queue, ["slow"])
    [message] = await pop_now(plane, queue)
    for attempt in (1, 2):
        assert message.delivery_attempt == attempt
        [message] = await pop_until(plane, queue)  # once the lease ran out
    assert message.delivery_attempt == 3
    assert (await plane.ack(message))[0].success
    assert (await plane.dlq(queue)).total == 0


async def test_renew_keeps_a_short_lease_alive(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["long job"])
    popped = await plane.pop(queue)
    popped_at = time.monotonic()

    renewed = await plane.renew(popped.messages[0], 30)

    assert renewed.success and renewed.lease_id == popped.lease_id and not renewed.error
    assert renewed.renewed == 1 and renewed.expires_at is not None
    await outlast_lease(popped_at, 1)  # the original lease is over
    assert not await plane.pop(queue)  # nobody else gets it
    assert (await plane.ack(popped.messages))[0].success


async def test_renew_by_lease_id_renews_a_multi_partition_lease(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    for p in ("a", "b"):
        await plane.push(queue, [p], partition=p)
    popped = await plane.pop(queue, partitions=2, batch=10)
    popped_at = time.monotonic()
    assert popped.partitions_claimed == 2 and popped.lease_id

    renewed = await plane.renew(popped.lease_id, 30)

    assert renewed.success and renewed.renewed == 2
    await outlast_lease(popped_at, 1)
    assert not await plane.pop(queue, partitions=2, batch=10)
    assert all(r.success for r in await plane.ack(popped.messages))


async def test_renew_after_expiry_fails_and_does_not_resurrect_the_lease(plane, queue, db):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [1])
    [message] = await pop_now(plane, queue)
    await lease_runs_out(db, message.lease_id)

    renewed = await plane.renew(message)

    assert not renewed.success and renewed.error
    [again] = await pop_now(plane, queue)  # another consumer gets it
    assert again.transaction_id == message.transaction_id


async def test_renew_after_ack_fails(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30))
    await plane.push(queue, [1])
    [message] = await pop_now(plane, queue)
    assert (await plane.ack(message))[0].success

    renewed = await plane.renew(message)

    assert not renewed.success
