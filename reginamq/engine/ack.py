"""Acknowledgements, lease renewal: parse, normalise statuses, apply them in one rq_ack call (of one
request, or of several fused by ack_fusion.py, whose answers :func:`split` hands back).

Nearly every acknowledgement acks and releases a whole leased span, and its answer is then the
same but for its index and transactionId: :class:`AckAnswers` keeps only the answers that
differ and renders the rest from one template, so an ack of a pop of thousands builds no
per-message objects between the database and the response bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec
import orjson

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
_RELEASED = b',"success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false}'


class AckAnswers(Sequence[dict]):
    """One request's answer per acknowledgement, in request order, as protocol objects
    (``{"index", "transactionId", "success", "error", "leaseReleased", "dlq", "noop"}``).
    ``rows`` holds rq_ack's (success, error, leaseReleased, dlq, noop) for the items that went
    through the per-message rules, by index; every other item acked and released its span."""

    __slots__ = ("rows", "txids")

    def __init__(self, txids: list[str], rows: dict[int, tuple]) -> None:
        self.txids = txids
        self.rows = rows

    def __len__(self) -> int:
        return len(self.txids)

    def __getitem__(self, index):  # type: ignore[override]  # an int: slices are part()'s
        index = range(len(self.txids))[index]
        return _answer(index, self.txids[index], self.rows.get(index))

    def __iter__(self) -> Iterator[dict]:
        rows = self.rows
        return (_answer(index, txid, rows.get(index)) for index, txid in enumerate(self.txids))

    def part(self, start: int, size: int) -> AckAnswers:
        """The answers of items ``start`` .. ``start + size - 1``, indexed from 0."""
        return AckAnswers(self.txids[start:start + size],
                          {index - start: row for index, row in self.rows.items() if start <= index < start + size})

    def failed(self) -> int:
        return sum(1 for row in self.rows.values() if not row[0])

    def dead_lettered(self) -> int:
        return sum(1 for row in self.rows.values() if row[0] and row[3])

    def render(self) -> bytes:
        """The JSON array of the answers."""
        dumps, rows = orjson.dumps, self.rows
        return b"[" + b",".join([
            b'{"index":%d,"transactionId":%b%b' % (index, dumps(txid), _RELEASED) if index not in rows
            else dumps(_answer(index, txid, rows[index])) for index, txid in enumerate(self.txids)]) + b"]"


def _answer(index: int, txid: str, row: tuple | None) -> dict:
    if row is None:
        return {"index": index, "transactionId": txid, "success": True, "error": None,
                "leaseReleased": True, "dlq": False, "noop": False}
    success, error, released, dead_lettered, noop = row
    return {"index": index, "transactionId": txid, "success": success, "error": error,
            "leaseReleased": released, "dlq": dead_lettered, "noop": noop}


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


def split(answers: AckAnswers, requests: list[PreparedAcks]) -> list[AckAnswers]:
    """A call's answers back to each of the requests it was made of (ack fusion), indexed within
    each."""
    if len(requests) == 1:
        return [answers]
    mine, offset = [], 0
    for prepared in requests:
        size = len(prepared.txids)
        mine.append(answers.part(offset, size))
        offset += size
    return mine


async def write(store: Store, prepared: PreparedAcks) -> AckAnswers:
    """One ack call (the store announces the partitions with work again); the answer per
    acknowledgement, in request order.

    The store answers an item of its own only when its cursor went through the per-message
    rules; the items of whole spans acknowledged and released (an ack of a pop, nearly every
    item) it only counts, and every item without an answer of its own is one of them."""
    if not prepared.txids:
        return AckAnswers([], {})
    rows = await store.messages.ack(prepared.groups, prepared.partitions, prepared.txids, prepared.leases,
                                    prepared.statuses, prepared.errors)
    answered: dict[int, tuple] = {}
    released = 0
    for row in rows:
        if row[0] is not None:
            answered[row[0]] = tuple(row[1:6])
        elif row[7] is not None:
            released += row[7]
    if released + len(answered) != len(prepared.txids):
        raise RuntimeError(f"rq_ack answered {len(answered)} and released {released} of {len(prepared.txids)}")
    return AckAnswers(prepared.txids, answered)


async def extend(store: Store, lease_id: str, seconds: int) -> dict:
    renewed, expires_at = await store.messages.extend_lease(lease_id, seconds)
    if not renewed:
        return {"leaseId": lease_id, "success": False, "renewed": 0,
                "error": "invalid or expired lease"}
    expires = stamp(expires_at)
    return {"leaseId": lease_id, "success": True, "renewed": renewed, "newExpiresAt": expires,
            "expiresAt": expires, "lease_expires_at": expires}
