from datetime import UTC, datetime

import msgspec
import orjson
import pytest

from reginamq.common.errors import BadRequest
from reginamq.engine import pop, push
from reginamq.engine.encryption import Sealer
from reginamq.http.routes import ROUTER


def test_static_and_dynamic_routes_match():
    route, params, _ = ROUTER.match("GET", "/api/v1/pop/queue/orders/partition/tenant/42")
    assert route is not None and route.handler.__name__ == "pop_partition"
    assert params == {"queue": "orders", "partition": "tenant/42"}
    assert ROUTER.match("GET", "/api/v1/pop/queue/orders/partition/")[0] is None
    route, params, _ = ROUTER.match("POST", "/api/v1/push")
    assert route.handler.__name__ == "push" and params == {}


def test_unknown_path_and_wrong_method_are_told_apart():
    assert ROUTER.match("GET", "/api/v1/nothing") == (None, {}, False)
    route, _, known = ROUTER.match("GET", "/api/v1/push")
    assert route is None and known


def test_pop_answer_is_the_stored_fragments_plus_delivery_fields():
    items = [push.PushItem(queue="q", payload=msgspec.Raw(b'{"n": 1}'), transactionId="t1"),
             push.PushItem(queue="q", payload=msgspec.Raw(b"[1,2]"), traceId="trace")]
    prepared = push.prepare(items)
    created = datetime(2026, 7, 30, 11, 2, 44, 512345, tzinfo=UTC)
    rows = [("q", "6f1c0a6e-5d0e-4c8f-9d4b-1f2e3d4c5b6a", "Default", created, 2, prepared.fragments)]
    answer = orjson.loads(pop.render(pop.Popped(rows, "lease-1"), "billing", Sealer().reveal))
    assert answer["partitionsClaimed"] == 1 and answer["leaseId"] == "lease-1"
    first, second = answer["messages"]
    assert first["data"] == {"n": 1} and first["transactionId"] == "t1" and first["traceId"] is None
    assert second["data"] == [1, 2] and second["traceId"] == "trace"
    assert second["transactionId"] == second["id"]  # defaults to the minted id
    assert first["createdAt"] == "2026-07-30T11:02:44.512Z"
    assert first["deliveryAttempt"] == 2 and first["consumerGroup"] == "billing"


def test_in_request_duplicates_collapse_to_the_first():
    items = [push.PushItem(queue="q", payload=msgspec.Raw(b"1"), transactionId="same"),
             push.PushItem(queue="q", payload=msgspec.Raw(b"2"), transactionId="same"),
             push.PushItem(queue="q", partition="other", payload=msgspec.Raw(b"3"), transactionId="same")]
    prepared = push.prepare(items)
    assert len(prepared.fragments) == 2
    assert [slot for slot, _txid, _queue in prepared.slots] == [0, 0, 1]


def test_push_refuses_oversized_batches():
    items = [push.PushItem(queue="q", payload=msgspec.Raw(b"1"))] * (push.MAX_ITEMS_PER_PUSH + 1)
    with pytest.raises(BadRequest) as caught:
        push.prepare(items)
    assert caught.value.status == 413
