"""Limits on the names and identifiers clients choose (documented in docs/protocol.md)."""

from __future__ import annotations

import re
import uuid

from reginamq.common.errors import BadRequest
from reginamq.store.consumer_groups import QUEUE_MODE

__all__ = ["QUEUE_MODE"]

MAX_NAME_LENGTH = 255
# A checked name never holds a control character: the store sends a column of names as one
# string joined by one (store/columns.py).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_name(kind: str, value: object) -> str:
    """Queue, partition, group, namespace and task names; transactionId and traceId too."""
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{kind} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise BadRequest(f"{kind} is longer than {MAX_NAME_LENGTH} characters")
    if not value.isprintable() and _CONTROL.search(value):  # printable: no control characters (fast path)
        raise BadRequest(f"{kind} must not contain control characters")
    return value


def check_queue_name(value: object, kind: str = "queue") -> str:
    """A queue name also travels in URL paths, where a slash would split it."""
    name = check_name(kind, value)
    if "/" in name:
        raise BadRequest(f"{kind} must not contain '/'")
    return name


def check_uuid(kind: str, value: object) -> str:
    """Ids the broker minted (partitionId, leaseId) are UUIDs; anything else cannot be ours."""
    if not isinstance(value, str):
        raise BadRequest(f"{kind} must be a UUID string")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BadRequest(f"{kind} must be a UUID, got {value[:64]!r}") from None


def partition_number(partition_id: str) -> int | None:
    """The 64-bit number a partition id carries in its first eight bytes (its last eight are
    zero: see rq_new_partition_id, 001_queues_and_partitions.sql), the framed pop answer's partition id; None
    for an id without one (a partition created before ids carried numbers)."""
    raw = uuid.UUID(partition_id).bytes
    return int.from_bytes(raw[:8], "big") if raw[8:] == bytes(8) else None


def check_partition_id(kind: str, value: object) -> str:
    """A partition id as the broker handed it out: its UUID, or the decimal number of the
    framed pop answer (:func:`partition_number`), read back into the UUID."""
    if isinstance(value, str) and value.isdigit() and value.isascii():
        number = int(value)
        if number >= 1 << 64:
            raise BadRequest(f"{kind} must be a UUID or a 64-bit partition number, got {value[:64]!r}")
        return str(uuid.UUID(bytes=number.to_bytes(8, "big") + bytes(8)))
    return check_uuid(kind, value)


def check_int(kind: str, value: object, low: int, high: int) -> int:
    """A count or a duration: an integer (not a bool, which Python counts as one) in low..high."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{kind} must be an integer between {low} and {high}")
    return value


def check_flag(kind: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{kind} must be true or false")
    return value


def group_or_queue_mode(value: str | None) -> str:
    return QUEUE_MODE if value in (None, "") else check_name("consumerGroup", value)
