"""Refusals through the library are typed exceptions carrying what HTTP would answer: the
status, the ``error`` text and the answer's other keys; the same refusal over HTTP decodes
(errors.from_answer) into the same exception."""

from __future__ import annotations

import pytest

from reginamq.library import (
    Conflict,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    PushItem,
    QueueFull,
    QueueOptions,
    ReginaError,
    Unavailable,
)
from reginamq.library.errors import from_answer


@pytest.mark.parametrize(("call", "status", "kind"), [
    (lambda broker, queue: broker.push("bad/name", [1]), 400, InvalidRequest),
    (lambda broker, queue: broker.push(queue, [1], partition=""), 400, InvalidRequest),
    (lambda broker, queue: broker.pop(queue, batch=0), 400, InvalidRequest),
    (lambda broker, queue: broker.pop(queue, batch=True), 400, InvalidRequest),
    (lambda broker, queue: broker.pop(), 400, InvalidRequest),
    (lambda broker, queue: broker.pop(queue, group="g", conflation=True, auto_ack=True), 400, InvalidRequest),
    (lambda broker, queue: broker.renew("not-a-uuid"), 400, InvalidRequest),
    (lambda broker, queue: broker.configure(queue, {"noSuchOption": 1}), 400, InvalidRequest),
    (lambda broker, queue: broker.configure(queue, QueueOptions(encryption_enabled=True)), 400, InvalidRequest),
    (lambda broker, queue: broker.push_items([PushItem(queue=queue, raw=b'{"a":1e400}')]), 400, InvalidRequest),
    (lambda broker, queue: broker.push_items([PushItem(queue=queue)]), 400, InvalidRequest),
    (lambda broker, queue: broker.push(queue, [None] * 10_001), 413, PayloadTooLarge),
    (lambda broker, queue: broker.dlq_replay("00000000-0000-0000-0000-000000000000"), 404, NotFound),
])
async def test_refusals_carry_the_http_status(library, queue, call, status, kind):
    with pytest.raises(kind) as refused:
        await call(library, queue)
    assert refused.value.status == status and refused.value.error


async def test_a_refused_pop_keeps_the_pop_answers_keys(library):
    with pytest.raises(InvalidRequest) as refused:
        await library.pop()
    assert refused.value.error == "namespace or task is required"
    assert refused.value.extra == {"success": False, "messages": []}


async def test_a_full_queue_names_what_was_not_written(library, queue):
    await library.configure(queue, QueueOptions(max_size=1))
    await library.push(queue, ["one"])
    with pytest.raises(QueueFull) as refused:
        await library.push(queue, ["two"])
    assert isinstance(refused.value, Conflict) and refused.value.status == 409
    assert refused.value.queues[0]["queue"] == queue and refused.value.items[0]["status"] == "rejected"


async def test_http_and_library_refuse_alike(library, http, queue):
    answer = await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": "0"})
    over_http = from_answer(answer.status_code, answer.content)
    with pytest.raises(ReginaError) as in_process:
        await library.pop(queue, batch=0)
    assert type(over_http) is type(in_process.value)
    assert (over_http.status, over_http.error, dict(over_http.extra)) == (
        in_process.value.status, in_process.value.error, dict(in_process.value.extra))


def test_from_answer_maps_statuses():
    assert type(from_answer(503, b'{"error": "database away"}')) is Unavailable
    assert isinstance(from_answer(409, {"error": "full", "code": "queue_full"}), QueueFull)
    assert from_answer(418, b"teapot").status == 418
