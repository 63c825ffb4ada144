"""Acknowledgements, lease renewal: parse, normalise statuses, apply them in one rq_ack call (of one
request, or of several fused by ack_fusion.py, whose answers :func:`split` hands back)."""

from __future__ import annotations

import msgspec

from reginamq.common.errors import BadRequest
from reginamq.common.times import stamp
from reginamq.engine.names import check_name, check_partition_id, check_uuid, group_or_queue_mode
from reginamq.store import Store

MAX_ACKS_PER_REQUEST = 10_000
MAX_ERROR_LENGTH = 8192
COMPLETED = frozenset({"completed", "success", "acked", "ok"})


class Ack(msgspec.Struct):
    transactionId: str
    partitionId: str
    consumerGroup: str | None = None
    leaseId: str | None = None
    status: str | None = None
    error: str | None = None


class AckBatch(msgspec.Struct):
    acknowledgments: list[Ack]
    consumerGroup: str | None = None


class PreparedAcks(msgspec.Struct):
    groups: list[str]
    partitions: list[str]
    txids: list[str]
    leases: list[str | None]
    statuses: list[str]
    errors: list[str | None]


COLUMNS = PreparedAcks.__struct_fields__  # all of them: what rq_ack takes


def normalise_status(status: str | None) -> str:
    """Case-sensitive, as Queen: the completed synonyms, retry, dlq; anything else is a failure."""
    if status is None or status in COMPLETED:
        return "completed"
    if status in ("retry", "dlq"):
        return status
    return "failed"


def prepare(acks: list[Ack], default_group: str | None = None) -> PreparedAcks:
    """Validate and normalise; the ids of a batch repeat (one partition, one lease), so each
    distinct value is checked once, not once per acknowledgement of a batch of thousands."""
    if len(acks) > MAX_ACKS_PER_REQUEST:
        raise BadRequest(f"at most {MAX_ACKS_PER_REQUEST} acknowledgments per request", status=413)
    prepared = PreparedAcks([], [], [], [], [], [])
    groups: dict[str | None, str] = {}
    partitions: dict[str, str] = {}
    leases: dict[str, str] = {}
    for position, ack in enumerate(acks):
        try:
            group = groups.get(ack.consumerGroup)
            if group is None:
                group = groups[ack.consumerGroup] = group_or_queue_mode(ack.consumerGroup or default_group)
            partition = partitions.get(ack.partitionId)
            if partition is None:
                partition = partitions[ack.partitionId] = check_partition_id("partitionId", ack.partitionId)
            lease = None
            if ack.leaseId:
                lease = leases.get(ack.leaseId)
                if lease is None:
                    lease = leases[ack.leaseId] = check_uuid("leaseId", ack.leaseId)
            prepared.groups.append(group)
            prepared.partitions.append(partition)
            prepared.txids.append(check_name("transactionId", ack.transactionId))
            prepared.leases.append(lease)
            if ack.error is not None and len(ack.error) > MAX_ERROR_LENGTH:
                raise BadRequest(f"error is longer than {MAX_ERROR_LENGTH} characters")
        except BadRequest as error:
            raise BadRequest(f"acknowledgments[{position}]: {error}", status=error.status) from None
        prepared.statuses.append(normalise_status(ack.status))
        prepared.errors.append(ack.error)
    return prepared


def cursors(prepared: PreparedAcks) -> set[tuple[str, str]]:
    """The (partition, consumer group) cursors the acknowledgements move."""
    return set(zip(prepared.partitions, prepared.groups, strict=True))


def split(answers: list[dict], requests: list[PreparedAcks]) -> list[list[dict]]:
    """A call's answers back to each of the requests it was made of (ack fusion), indexed within
    each."""
    if len(requests) == 1:
        return [answers]
    mine, offset = [], 0
    for prepared in requests:
        size = len(prepared.txids)
        part = answers[offset:offset + size]
        for answer in part:
            answer["index"] -= offset
        mine.append(part)
        offset += size
    return mine


async def write(store: Store, prepared: PreparedAcks) -> list[dict]:
    """One ack call (the store announces the partitions with work again); the answer per
    acknowledgement, in request order.

    The store answers an item of its own only when its cursor went through the per-message
    rules; the items of whole spans acknowledged and released (an ack of a pop, nearly every
    item) it only counts, and every item without an answer of its own is one of them."""
    if not prepared.txids:
        return []
    rows = await store.messages.ack(prepared.groups, prepared.partitions, prepared.txids, prepared.leases,
                                    prepared.statuses, prepared.errors)
    answered: dict[int, object] = {}
    released = 0
    for row in rows:
        if row[0] is not None:
            answered[row[0]] = row
        elif row[7] is not None:
            released += row[7]
    if released + len(answered) != len(prepared.txids):
        raise RuntimeError(f"rq_ack answered {len(answered)} and released {released} of {len(prepared.txids)}")
    answers = []
    for index, txid in enumerate(prepared.txids):
        row = answered.get(index)
        answers.append(
            {"index": index, "transactionId": txid, "success": True, "error": None,
             "leaseReleased": True, "dlq": False, "noop": False} if row is None else
            {"index": index, "transactionId": txid, "success": row[1], "error": row[2],
             "leaseReleased": row[3], "dlq": row[4], "noop": row[5]})
    return answers


async def extend(store: Store, lease_id: str, seconds: int) -> dict:
    renewed, expires_at = await store.messages.extend_lease(lease_id, seconds)
    if not renewed:
        return {"leaseId": lease_id, "success": False, "renewed": 0,
                "error": "invalid or expired lease"}
    expires = stamp(expires_at)
    return {"leaseId": lease_id, "success": True, "renewed": renewed, "newExpiresAt": expires,
            "expiresAt": expires, "lease_expires_at": expires}
