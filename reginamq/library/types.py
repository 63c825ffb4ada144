"""The typed values of the library: what a caller hands the broker and what it gets back.

Every answer type is a frozen msgspec Struct whose encoded field names are the HTTP answer's
keys, so ``msgspec.json.decode(http_body, type=PopResult)`` reads an HTTP pop into the type
``Broker.pop`` returns: the library and HTTP answer the same things under the same names. Three
values are spelled the Python way here: queue mode's consumer group is None (HTTP:
``"__QUEUE_MODE__"``), an autoAck pop's lease id is None (HTTP: ``""``), and each message names
its queue (HTTP names it once for the pop). Partial
outcomes are values, as over HTTP: a rejected ack, a lease that could not be renewed and a
rolled-back transaction answer ``success=False``; an empty pop (HTTP's 204) is a
:class:`PopResult` without messages.

A payload stays the JSON bytes it was pushed as (:class:`msgspec.Raw`); :attr:`Message.data`
and :meth:`Message.decode` turn it into Python values only when asked.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec

T = TypeVar("T")

AckStatus = Literal["completed", "retry", "failed", "dlq"]
SubscriptionMode = Literal["all", "new", "new-only"]

_decode_any = msgspec.json.Decoder().decode


class PushItem(msgspec.Struct, frozen=True, kw_only=True):
    """One message to push: ``data`` is encoded as JSON, or ``raw`` is JSON bytes sent verbatim
    (checked as strictly as an HTTP body is). Exactly one of the two is given."""

    queue: str
    data: Any = msgspec.UNSET
    raw: bytes | None = None
    partition: str = "Default"
    transaction_id: str | None = None
    trace_id: str | None = None


class PushResult(msgspec.Struct, frozen=True, kw_only=True):
    """One pushed item's outcome, in the order of the items: ``duplicate`` carries the
    original message's id; ``buffered`` was written to the spool while the database is away
    and will be stored in order."""

    index: int
    message_id: str
    transaction_id: str
    queue: str = msgspec.field(name="queueName")
    status: Literal["queued", "duplicate", "buffered"]


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A delivered message. ``lease_id`` is None for a pop with ``auto_ack`` (nothing to ack);
    ``consumer_group`` is None in queue mode (no group named)."""

    id: str
    transaction_id: str = msgspec.field(name="transactionId")
    trace_id: str | None = msgspec.field(default=None, name="traceId")
    payload: msgspec.Raw = msgspec.field(name="data")
    producer_sub: str | None = msgspec.field(default=None, name="producerSub")
    created_at: datetime = msgspec.field(name="createdAt")
    queue: str | None = None
    partition: str
    partition_id: str = msgspec.field(name="partitionId")
    lease_id: str | None = msgspec.field(default=None, name="leaseId")
    consumer_group: str | None = msgspec.field(default=None, name="consumerGroup")
    delivery_attempt: int = msgspec.field(default=1, name="deliveryAttempt")

    @property
    def data(self) -> Any:
        """The payload as Python values (dicts, lists, str, int, float, bool, None)."""
        return _decode_any(self.payload)

    def decode(self, type: type[T]) -> T:
        """The payload decoded into ``type`` (a Struct, a dataclass, ...); a payload that does not
        fit raises :class:`msgspec.ValidationError`."""
        return msgspec.json.decode(self.payload, type=type)


class AutopilotAdvice(msgspec.Struct, frozen=True, kw_only=True):
    """The broker's sizing of a pop that left batch or partitions to it."""

    partitions: int
    batch: int
    wait_ms: int = msgspec.field(name="waitMs")


class PopResult(msgspec.Struct, frozen=True, kw_only=True):
    """One pop's delivery: one lease over every partition it claimed (``partitions_claimed``),
    the messages in delivery order (a partition's together, in its order)."""

    queue: str = ""
    partition: str = ""
    partition_id: str = msgspec.field(default="", name="partitionId")
    lease_id: str | None = msgspec.field(default=None, name="leaseId")
    consumer_group: str | None = msgspec.field(default=None, name="consumerGroup")
    partitions_claimed: int = msgspec.field(default=0, name="partitionsClaimed")
    messages: list[Message] = msgspec.field(default_factory=list)
    conflation: bool = False
    conflation_conflict: bool = msgspec.field(default=False, name="conflationConflict")
    autopilot: AutopilotAdvice | None = None

    def __bool__(self) -> bool:
        return bool(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


class Ack(msgspec.Struct, frozen=True, kw_only=True):
    """An acknowledgement by id, for a message known only by its ids (popped elsewhere)."""

    transaction_id: str = msgspec.field(name="transactionId")
    partition_id: str = msgspec.field(name="partitionId")
    lease_id: str | None = msgspec.field(default=None, name="leaseId")
    group: str | None = msgspec.field(default=None, name="consumerGroup")
    status: AckStatus = "completed"
    error: str | None = None


class AckResult(msgspec.Struct, frozen=True, kw_only=True):
    """One acknowledgement's outcome, in the order given: ``success=False`` with ``error`` for
    an expired or foreign lease or an unknown message; ``dlq`` when it dead-lettered."""

    index: int
    transaction_id: str = msgspec.field(name="transactionId")
    success: bool
    error: str | None = None
    lease_released: bool = msgspec.field(default=False, name="leaseReleased")
    dlq: bool = False
    noop: bool = False


class RenewResult(msgspec.Struct, frozen=True, kw_only=True):
    """A lease renewal: ``renewed`` partitions now leased until ``expires_at``; a lease that
    expired or is unknown answers ``success=False``."""

    lease_id: str = msgspec.field(name="leaseId")
    success: bool
    renewed: int = 0
    expires_at: datetime | None = msgspec.field(default=None, name="expiresAt")
    error: str | None = None


class TxAckResult(msgspec.Struct, frozen=True, kw_only=True, tag="ack"):
    index: int
    success: bool
    transaction_id: str = msgspec.field(name="transactionId")
    error: str | None = None
    lease_released: bool = msgspec.field(default=False, name="leaseReleased")
    dlq: bool = False


class TxPushResult(msgspec.Struct, frozen=True, kw_only=True, tag="push"):
    index: int
    success: bool
    transaction_id: str = msgspec.field(name="transactionId")
    message_id: str = msgspec.field(name="messageId")
    partition_id: str = msgspec.field(name="partitionId")
    queue: str = msgspec.field(name="queueName")
    status: str


class TransactionResult(msgspec.Struct, frozen=True, kw_only=True):
    """Acks and pushes committed together (``success``) or not at all (``reason`` says why)."""

    transaction_id: str = msgspec.field(name="transactionId")
    success: bool
    reason: Literal["lease_expired", "ack_rejected", "duplicate", "queue_full"] | None = None
    error: str | None = None
    results: list[TxAckResult | TxPushResult] = msgspec.field(default_factory=list)


class QueueOptions(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """A queue's options (docs: engine/options.py); only those set are sent, so a merge keeps
    the others and ``None`` returns one to its default."""

    lease_time: int | msgspec.UnsetType | None = msgspec.UNSET
    retry_limit: int | msgspec.UnsetType | None = msgspec.UNSET
    retry_delay: int | msgspec.UnsetType | None = msgspec.UNSET
    dead_letter_queue: bool | msgspec.UnsetType | None = msgspec.UNSET
    dlq_after_max_retries: bool | msgspec.UnsetType | None = msgspec.UNSET
    delayed_processing: int | msgspec.UnsetType | None = msgspec.UNSET
    window_buffer: int | msgspec.UnsetType | None = msgspec.UNSET
    min_pop_wait_time: int | msgspec.UnsetType | None = msgspec.UNSET
    retention_enabled: bool | msgspec.UnsetType | None = msgspec.UNSET
    retention_seconds: int | msgspec.UnsetType | None = msgspec.UNSET
    completed_retention_seconds: int | msgspec.UnsetType | None = msgspec.UNSET
    max_wait_time_seconds: int | msgspec.UnsetType | None = msgspec.UNSET
    encryption_enabled: bool | msgspec.UnsetType | None = msgspec.UNSET
    dedup_window_seconds: int | msgspec.UnsetType | None = msgspec.UNSET
    priority: int | msgspec.UnsetType | None = msgspec.UNSET
    ttl: int | msgspec.UnsetType | None = msgspec.UNSET
    max_size: int | msgspec.UnsetType | None = msgspec.UNSET


class QueueConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A queue as configured: its complete option set, under the wire's camelCase names."""

    configured: bool
    queue_id: str = msgspec.field(name="queueId")
    queue: str
    namespace: str | None = None
    task: str | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class DeleteResult(msgspec.Struct, frozen=True, kw_only=True):
    deleted: bool
    queue: str


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """One group's dead-lettered message; ``id`` names this record (for replay)."""

    id: str
    message_id: str = msgspec.field(name="messageId")
    transaction_id: str = msgspec.field(name="transactionId")
    trace_id: str | None = msgspec.field(default=None, name="traceId")
    partition_id: str = msgspec.field(name="partitionId")
    queue: str
    partition: str
    consumer_group: str | None = msgspec.field(default=None, name="consumerGroup")
    error_message: str | None = msgspec.field(default=None, name="errorMessage")
    retry_count: int = msgspec.field(default=0, name="retryCount")
    data: Any = None
    created_at: datetime = msgspec.field(name="createdAt")
    failed_at: datetime = msgspec.field(name="failedAt")


class DlqPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of dead letters and the total of the filtered set. ``members_unreached``: over
    several member databases, the members that could not be read (their letters are missing)."""

    messages: list[DeadLetter]
    total: int
    limit: int
    offset: int
    members_unreached: frozenset[int] = frozenset()


class ReplayResult(msgspec.Struct, frozen=True, kw_only=True):
    """A dead letter put back at the end of its partition as a new message."""

    success: bool
    id: str
    message_id: str = msgspec.field(name="messageId")
    transaction_id: str = msgspec.field(name="transactionId")
    partition_id: str = msgspec.field(name="partitionId")
    queue: str
    partition: str
