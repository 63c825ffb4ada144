"""engine/operations.py is where the message plane validates and defaults: its refusals and
defaults, asked directly (as the library asks), and the HTTP routes left with nothing to check.

Every refusal here is raised before the database is asked, so the engine broker is a real one
that was never started."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

import reginamq
from reginamq.common.errors import BadRequest
from reginamq.config import Settings
from reginamq.engine import operations
from reginamq.engine import pop as pops
from reginamq.engine.ack import Ack
from reginamq.engine.broker import Broker
from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.options import MAX_SECONDS
from reginamq.engine.push import PushItem
from reginamq.engine.queues import ConfigureBody
from reginamq.engine.transaction import TransactionBody

SETTINGS = Settings.checked({})
LEASE = "0191c6f4-8a1e-7c3a-9f00-000000000001"
POP_SHAPE = {"success": False, "messages": []}


@pytest.fixture
def broker(tmp_path) -> Broker:
    return Broker(Settings.checked({}, database_url="postgresql://nobody@127.0.0.1:1/none", spool_dir=tmp_path))


def refusal(call, *args, **kwargs) -> BadRequest:
    with pytest.raises(BadRequest) as refused:
        call(*args, **kwargs)
    return refused.value


async def async_refusal(call, *args, **kwargs) -> BadRequest:
    with pytest.raises(BadRequest) as refused:
        await call(*args, **kwargs)
    return refused.value


def test_a_pop_left_unsaid_gets_the_defaults_http_gave():
    request = operations.pop_request(SETTINGS, queue="orders")
    assert request == pops.PopRequest(
        queue="orders", partition=None, namespace=None, task=None, group=QUEUE_MODE, batch=None, partitions=None,
        auto_ack=False, wait=False, timeout_ms=pops.DEFAULT_TIMEOUT_MS, lease_seconds=0,
        subscription_mode=SETTINGS.default_subscription_mode, subscription_from=None, autopilot=False,
        conflation=None)
    assert operations.pop_request(SETTINGS, queue="orders", group="").group == QUEUE_MODE


def test_the_subscription_mode_defaults_to_the_brokers_and_new_only_is_new():
    everything = Settings.checked({}, default_subscription_mode="all")
    assert operations.pop_request(everything, queue="q", group="g").subscription_mode == "all"
    assert operations.pop_request(everything, queue="q", group="g", subscription_mode="new-only"
                                  ).subscription_mode == "new"


def test_a_subscription_start_is_now_or_a_moment_in_range_read_as_utc_without_a_zone():
    before = datetime.now(UTC)
    assert operations.pop_request(SETTINGS, queue="q", subscription_from="now").subscription_from >= before
    naive = datetime(2024, 5, 1, 12)
    assert operations.pop_request(SETTINGS, queue="q", subscription_from=naive).subscription_from == \
        naive.replace(tzinfo=UTC)
    error = refusal(operations.pop_request, SETTINGS, queue="q", subscription_from=datetime(9999, 1, 1))
    assert str(error) == "subscriptionFrom must be 'now' or a moment between 1000 and 9000"
    assert refusal(operations.pop_request, SETTINGS, queue="q", subscription_from="yesterday").status == 400


@pytest.mark.parametrize(("given", "error"), [
    ({"batch": 0}, "batch must be an integer between 1 and 10000"),
    ({"batch": 10_001}, "batch must be an integer between 1 and 10000"),
    ({"batch": True}, "batch must be an integer between 1 and 10000"),
    ({"batch": 2.0}, "batch must be an integer between 1 and 10000"),
    ({"partitions": 1_001}, "partitions must be an integer between 1 and 1000"),
    ({"timeout_ms": -1}, "timeout must be an integer between 0 and 3600000"),
    ({"lease_seconds": MAX_SECONDS + 1}, f"leaseSeconds must be an integer between 0 and {MAX_SECONDS}"),
    ({"wait": "yes"}, "wait must be true or false"),
    ({"auto_ack": 1}, "autoAck must be true or false"),
    ({"autopilot": None}, "autopilot must be true or false"),
    ({"conflation": "true", "group": "g"}, "conflation must be true or false"),
    ({"subscription_mode": "latest"}, "subscriptionMode must be one of: all, new, new-only"),
    ({"group": "a\x00b"}, "consumerGroup must not contain control characters"),
    ({"partition": ""}, "partition must be a non-empty string"),
    ({"queue": "a/b"}, "queue must not contain '/'"),
])
def test_a_pop_parameter_out_of_bounds_is_a_400_naming_it(given, error):
    refused = refusal(operations.pop_request, SETTINGS, **{"queue": "q", **given})
    assert (refused.status, str(refused), refused.extra) == (400, error, {})


@pytest.mark.parametrize(("given", "error"), [
    ({}, "namespace or task is required"),
    ({"partition": "p"}, "partition needs queue: a partition is named within its queue"),
    ({"queue": "q", "namespace": "n"}, "pop from a queue or from a namespace/task selection, not both"),
    ({"queue": "q", "conflation": True}, "conflation requires consumerGroup: queue mode is one cursor shared by "
                                         "every consumer, with no group to hold a delivery policy"),
    ({"queue": "q", "group": "g", "conflation": True, "auto_ack": True},
     "conflation cannot be combined with autoAck: the newest message would be consumed at delivery, with no lease "
     "to retry it if its handler fails"),
])
def test_a_pop_asking_for_what_cannot_go_together_is_refused_in_a_pops_shape(given, error):
    refused = refusal(operations.pop_request, SETTINGS, **given)
    assert (refused.status, str(refused), refused.extra) == (400, error, POP_SHAPE)


def test_a_discovery_pop_names_a_namespace_or_a_task_and_checks_them():
    request = operations.pop_request(SETTINGS, namespace="billing", task="invoices")
    assert (request.queue, request.namespace, request.task) == (None, "billing", "invoices")
    assert str(refusal(operations.pop_request, SETTINGS, task="x" * 256)) == "task is longer than 255 characters"


def test_a_dlq_page_defaults_and_bounds():
    query = operations.dlq_query(queue="orders")
    assert (query.limit, query.offset, query.group, query.partition) == (100, 0, None, None)
    assert str(refusal(operations.dlq_query, queue=None)) == "queue is required"
    assert str(refusal(operations.dlq_query, queue="q", limit=1_001)) == "limit must be an integer between 1 and 1000"
    assert str(refusal(operations.dlq_query, queue="q", offset=-1)).startswith("offset must be an integer between 0")
    assert str(refusal(operations.dlq_query, queue="q", group="\x01")) == \
        "consumerGroup must not contain control characters"


def test_payloads_from_outside_a_checked_body_get_strict_json():
    operations.check_payloads([b'{"a":1}', b"[1,2]", b'"text"'])
    for bad in (b"1e400", b'{"a":1,"a":2}', b"[" * 200 + b"]" * 200, b'"\xff"'):
        assert refusal(operations.check_payloads, [b"1", bad]).status == 400


async def test_refusals_of_the_calls_that_write(broker):
    payload = msgspec.Raw(b"1")
    refused = await async_refusal(operations.push, broker, [PushItem(queue="a/b", payload=payload)])
    assert str(refused) == "items[0]: queue must not contain '/'"
    refused = await async_refusal(operations.ack, broker, [Ack(transactionId="t", partitionId="nope")])
    assert str(refused).startswith("acknowledgments[0]: partitionId must be a UUID")
    refused = await async_refusal(operations.transaction, broker, TransactionBody(operations=[]))
    assert str(refused) == "a transaction needs at least one operation"


async def test_a_renewal_names_a_lease_and_a_whole_number_of_seconds(broker):
    assert str(await async_refusal(operations.renew, broker, "abc")) == "leaseId must be a UUID, got 'abc'"
    for seconds in (0, MAX_SECONDS + 1, True, 1.5, "60", None):
        refused = await async_refusal(operations.renew, broker, LEASE, seconds)
        assert str(refused) == f"seconds must be an integer between 1 and {MAX_SECONDS}"


async def test_encryption_is_refused_by_a_broker_without_a_key(broker):
    body = ConfigureBody(queue="secrets", options={"encryptionEnabled": True})
    refused = await async_refusal(operations.configure, broker, body)
    assert refused.status == 400 and str(refused).startswith("encryptionEnabled needs an encryption key")


async def test_dead_letter_calls_check_the_id_and_the_queue(broker):
    assert str(await async_refusal(operations.dlq_replay, broker, "7")) == "id must be a UUID, got '7'"
    assert str(await async_refusal(operations.dlq_purge, broker, queue="")) == "queue is required"
    refused = await async_refusal(operations.dlq_purge, broker, queue="q", partition="")
    assert str(refused) == "partition must be a non-empty string"


def test_a_call_the_database_could_not_serve_is_counted_for_the_meter_and_the_outage_log(broker):
    broker.database.reachability.lost(None)
    operations.unavailable(broker)
    assert (broker.meter.db_errors, broker.database.reachability.refused) == (1, 1)


TRANSPORT_ONLY = ("http/messages.py", "http/queues.py", "http/dlq.py")


@pytest.mark.parametrize("module", TRANSPORT_ONLY)
def test_the_message_plane_routes_leave_validation_to_the_engine(module):
    """They import no checker of engine/names.py and raise no BadRequest: nothing is left for
    them to validate that the library would not validate too."""
    tree = ast.parse((Path(reginamq.__file__).parent / module).read_text(encoding="utf-8"))
    imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert not {name for source, name in imported if source == "reginamq.engine.names"}
    assert ("reginamq.engine", "names") not in imported
    assert ("reginamq.common.errors", "BadRequest") not in imported
