"""The framed pop answer against queen-mq's own decoder, and partition numbers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import msgspec
import orjson
import pytest
from queen.http.pop_frames import decode_pop_frames

from reginamq.common.errors import BadRequest
from reginamq.engine import pop, push
from reginamq.engine.encryption import Sealer
from reginamq.engine.names import check_partition_id, partition_number
from reginamq.http import pop_frames

NUMBERED = "9e3779b9-7f4a-7c15-0000-000000000000"  # what rq_new_partition_id makes of sequence value 1
OTHER = "3c6ef372-fe94-f82a-0000-000000000000"
CREATED = datetime(2026, 7, 30, 11, 2, 44, 512345, tzinfo=UTC)


def rows_for(items: list[push.PushItem], partition_id: str = NUMBERED, first_offset: int = 7) -> list[tuple]:
    fragments = push.prepare(items, producer_sub="svc").fragments
    return [("q", partition_id, "Default", CREATED, 1, fragments[:2], None, None, None, None, first_offset, False),
            ("q", partition_id, "Default", CREATED, 1, fragments[2:], None, None, None, None, first_offset + 2,
             False),
            ("q", OTHER, "other", CREATED, 3, fragments[:1], None, None, None, None, 0, False)]


ITEMS = [push.PushItem(queue="q", payload=msgspec.Raw(b'{"n": 1, "s": "\\u00e9\\n"}'), transactionId="t-\u00e9"),
         push.PushItem(queue="q", payload=msgspec.Raw(b"[1,2]"), traceId=str(uuid.uuid4())),
         push.PushItem(queue="q", payload=msgspec.Raw(b'"text"'), transactionId="t3")]


def test_the_client_unpacks_the_frames_into_what_the_json_answer_says():
    popped = pop.Popped(rows_for(ITEMS), "lease-1", conflation=True)
    framed = decode_pop_frames(pop_frames.render(popped, "billing", Sealer().reveal))
    plain = orjson.loads(pop.render(popped, "billing", Sealer().reveal))

    assert framed["conflation"] is True and plain["conflation"] is True
    assert framed["partitionsClaimed"] == plain["partitionsClaimed"] == 2
    assert len(framed["messages"]) == len(plain["messages"]) == 4
    for one, other in zip(framed["messages"], plain["messages"], strict=True):
        for field in ("id", "transactionId", "traceId", "data", "producerSub", "createdAt", "partition",
                      "leaseId", "consumerGroup", "deliveryAttempt"):
            assert one[field] == other[field], field
        assert check_partition_id("partitionId", one["partitionId"]) == other["partitionId"]
    assert [m["offset"] for m in framed["messages"]] == [7, 8, 9, 0]


def test_our_decoder_reads_what_the_encoder_writes():
    popped = pop.Popped(rows_for(ITEMS), "lease-1")
    decoded = pop_frames.decode(pop_frames.render(popped, "g", Sealer().reveal))
    first = {"n": 1, "s": "\u00e9\n"}
    assert [m["data"] for m in decoded["messages"]] == [first, [1, 2], "text", first]
    assert decoded["messages"][0]["partitionId"] == str(partition_number(NUMBERED))


@pytest.mark.parametrize("rows", [
    rows_for(ITEMS, partition_id=str(uuid.uuid4())),  # created before ids carried numbers
    rows_for([push.PushItem(queue="q", payload=msgspec.Raw(b"1"), traceId="not-a-uuid")] * 3),
    rows_for([push.PushItem(queue="q", payload=msgspec.Raw(b"1"), traceId=str(uuid.uuid4()).upper())] * 3),
])
def test_what_frames_cannot_carry_exactly_is_refused_so_the_answer_is_json(rows):
    with pytest.raises(pop_frames.NotFramable):
        pop_frames.render(pop.Popped(rows, "lease"), "g", Sealer().reveal)


def test_a_partition_number_reads_back_into_its_id():
    number = partition_number(NUMBERED)
    assert number == 0x9E3779B97F4A7C15
    assert check_partition_id("partitionId", str(number)) == NUMBERED
    assert check_partition_id("partitionId", NUMBERED.upper()) == NUMBERED
    assert partition_number(str(uuid.uuid4())) is None
    for bad in (str(1 << 64), "12x", "-5", "\u0661\u0662"):
        with pytest.raises(BadRequest):
            check_partition_id("partitionId", bad)
