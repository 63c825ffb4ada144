"""Acknowledgements, lease renewal: parse, normalise statuses, one rq_ack call per request."""

from __future__ import annotations

import msgspec

from reginamq.engine.errors import BadRequest
from reginamq.engine.names import check_name, check_uuid, group_or_queue_mode, join_names, split_names
from reginamq.engine.waiters import announce

# rq_ack answers cursor by cursor; the answer goes in request order
# groups, transactionIds and statuses come joined (names.join_names)
ACK_SQL = ("SELECT item, success, error, lease_released, dlq, noop, notice FROM rq_ack("
           f"{split_names('$1')}, $2, {split_names('$3')}, $4, {split_names('$5')}, $6) ORDER BY item")
EXTEND_SQL = "SELECT renewed, expires_at FROM rq_extend_lease($1, $2)"
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


def normalise_status(status: str | None) -> str:
    """Case-sensitive, as Queen: the completed synonyms, retry, dlq; anything else is a failure."""
    if status is None or status in COMPLETED:
        return "completed"
    if status in ("retry", "dlq"):
        return status
    return "failed"


def prepare(acks: list[Ack], default_group: str | None = None) -> PreparedAcks:
    """Validate and normalise; the ids of a batch repeat (one partition, one lease), so each
    distinct value is checked once (a UUID's check costs 2 us; a batch holds thousands)."""
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
                partition = partitions[ack.partitionId] = check_uuid("partitionId", ack.partitionId)
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


async def write(conn, prepared: PreparedAcks) -> list[dict]:
    if not prepared.txids:
        return []
    errors = [] if prepared.errors.count(None) == len(prepared.errors) else prepared.errors  # unnest pads with NULLs
    rows = await conn.fetch(ACK_SQL, join_names(prepared.groups), prepared.partitions, join_names(prepared.txids),
                            prepared.leases, join_names(prepared.statuses), errors)
    await announce(conn, [row[6] for row in rows if row[6] is not None])  # partitions with work again
    return [
        {"index": row[0], "transactionId": prepared.txids[row[0]], "success": row[1], "error": row[2],
         "leaseReleased": row[3], "dlq": row[4], "noop": row[5]}
        for row in rows if row[0] is not None
    ]


async def extend(conn, lease_id: str, seconds: int) -> dict:
    row = await conn.fetchrow(EXTEND_SQL, lease_id, seconds)
    renewed, expires_at = row[0], row[1]
    if not renewed:
        return {"leaseId": lease_id, "success": False, "renewed": 0,
                "error": "invalid or expired lease"}
    stamp = expires_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"leaseId": lease_id, "success": True, "renewed": renewed, "newExpiresAt": stamp,
            "expiresAt": stamp, "lease_expires_at": stamp}
