"""The message plane through engine/operations.py in this process, on the session's database: the
defaults it fills in and the meter counts it keeps are the same whichever door a call came
through (the HTTP routes call it too)."""

from __future__ import annotations

import msgspec
import pytest

from reginamq.common.errors import BadRequest
from reginamq.config import Settings
from reginamq.engine import operations
from reginamq.engine.ack import Ack
from reginamq.engine.broker import Broker
from reginamq.engine.push import PushItem
from tests.conftest import MEMBERS, spool_dir

MISSING = "0191c6f4-8a1e-7c3a-9f00-000000000001"


@pytest.fixture
async def broker(database_url):
    engine = Broker(Settings.checked({}, database_url=" ".join(MEMBERS.get(database_url, [database_url])),
                                     spool_dir=spool_dir(), pool_size=2))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_push_pop_ack_and_renew_keep_the_meter_and_fill_in_the_defaults(broker, queue):
    items = [PushItem(queue=queue, payload=msgspec.Raw(b'{"n":%d}' % n)) for n in range(3)]
    pushed = await operations.push(broker, items)
    assert [answer["status"] for answer in pushed] == ["queued"] * 3
    assert (broker.meter.push_requests, broker.meter.push_messages) == (1, 3)

    request = operations.pop_request(broker.settings, queue=queue)
    popped = await operations.pop(broker, request)
    assert sum(len(row[5]) for row in popped.rows) == 3
    [row] = popped.rows
    assert row[2] == "Default"

    renewed = await operations.renew(broker, popped.lease_id)
    assert renewed["success"]
    acks = [Ack(transactionId=answer["transaction_id"], partitionId=row[1], leaseId=popped.lease_id)
            for answer in pushed]
    answers = await operations.ack(broker, acks)
    assert all(answer["success"] for answer in answers)
    assert (broker.meter.ack_requests, broker.meter.ack_messages) == (1, 3)

    pops_before = broker.meter.pop_requests
    empty = await operations.pop(broker, request)
    assert not empty.rows and broker.meter.pop_requests == pops_before + 1


async def test_an_unknown_dead_letter_is_a_404_and_a_purge_of_none_deletes_nothing(broker, queue):
    with pytest.raises(BadRequest) as refused:
        await operations.dlq_replay(broker, MISSING)
    assert (refused.value.status, str(refused.value)) == (404, f"no dead letter with id {MISSING}")
    assert await operations.dlq_purge(broker, queue=queue) == {"success": True, "deleted": 0}
    page = await operations.dlq_page(broker, operations.dlq_query(queue=queue))
    assert page["messages"] == [] and page["total"] == 0
