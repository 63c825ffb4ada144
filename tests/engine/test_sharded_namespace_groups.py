"""A named consumer group's namespace pop over several member databases (docs/shards.md, "A named
group's subscription"): the group's subscription to every queue the pop selects starts at one
instant on every member, even when the pop is answered by the first member it asks, so the
group gets every message pushed after its first pop, whichever member holds it."""

from __future__ import annotations

import uuid

import orjson

from reginamq.store.members import place
from tests.engine.helpers import ack, pop, push, sharded


async def namespace_pop(messages, namespace: str, group: str, batch: int, partitions: int):
    """One pop of ``group`` over the queues of ``namespace`` (its first subscribes it from now
    on); answers (lease id, [(partition id, partition name, transactionId)])."""
    lease_id = str(uuid.uuid4())
    rows = await messages.pop(None, None, namespace, None, group, batch, partitions, False, 30, lease_id, "new", None,
                              None, None, True, [], None, True, None, False)
    rows = [row for row in rows if row[1] is not None]
    return lease_id, [(row[1], row[2], orjson.loads(b"{" + fragment + b"}")["transactionId"])
                      for row in rows for fragment in row[5]]


async def test_a_groups_first_namespace_pop_subscribes_it_on_every_member_at_once(database_url):
    namespace = f"ns{uuid.uuid4().hex[:6]}"
    first, second = f"{namespace}.first", f"{namespace}.second"
    async with sharded(database_url) as (deployment, store):
        ids = [member.id for member in deployment.members]
        on_each = {queue: {place(queue, f"p{n}", ids): f"p{n}" for n in range(60)} for queue in (first, second)}
        await push(store.messages, [(queue, name, f"before-{queue}-{name}")
                                    for queue in (first, second) for name in on_each[queue].values()])
        # the group reads the first queue from now on (a pop of that queue subscribes it everywhere)
        _, delivered, _ = await pop(store.messages, first, group="g", mode="new")
        assert delivered == []
        await push(store.messages, [(first, name, f"ready-{name}") for name in on_each[first].values()])
        # its first pop of the namespace, which also selects the second queue, is answered by the
        # first member it asks
        lease_id, delivered = await namespace_pop(store.messages, namespace, "g", 1, 1)
        assert len(delivered) == 1
        await ack(store.messages, lease_id, delivered, group="g")
        await push(store.messages, [(second, name, f"after-{name}") for name in on_each[second].values()])
        seen = []
        for _ in range(20):
            lease_id, delivered = await namespace_pop(store.messages, namespace, "g", 100, 100)
            if not delivered:
                break
            await ack(store.messages, lease_id, delivered, group="g")
            seen += [txid for _, _, txid in delivered]
        assert sorted(txid for txid in seen if txid.startswith("after-")) == sorted(
            f"after-{name}" for name in on_each[second].values())
