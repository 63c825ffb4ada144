"""reginamq as a library: the broker inside a Python application, without an HTTP hop.

``async with Broker(database_url=...) as broker`` (or no URL: the embedded PostgreSQL in a data
folder, as ``reginamq serve`` runs) gives the message plane of the HTTP API, through the same
validated engine path (engine/operations.py) and over the same database, so HTTP clients and
brokers on that database interoperate with it: push, pop, ack, lease renewal, transactions,
configure, delete, the DLQ, and a consumer loop. Answers are typed (types.py), refusals are
exceptions carrying the HTTP status (errors.py).
"""

from reginamq.library.broker import Broker
from reginamq.library.consumer import Consumer
from reginamq.library.errors import (
    BrokerClosed,
    Conflict,
    InternalError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    ReginaError,
    StartError,
    Unavailable,
)
from reginamq.library.types import (
    Ack,
    AckResult,
    AckStatus,
    AutopilotAdvice,
    DeadLetter,
    DeleteResult,
    DlqPage,
    Message,
    PopResult,
    PushItem,
    PushResult,
    QueueConfig,
    QueueOptions,
    RenewResult,
    ReplayResult,
    TransactionResult,
    TxAckResult,
    TxPushResult,
)

__all__ = [
    "Ack",
    "AckResult",
    "AckStatus",
    "AutopilotAdvice",
    "Broker",
    "BrokerClosed",
    "Conflict",
    "Consumer",
    "DeadLetter",
    "DeleteResult",
    "DlqPage",
    "InternalError",
    "InvalidRequest",
    "Message",
    "NotFound",
    "PayloadTooLarge",
    "PopResult",
    "PushItem",
    "PushResult",
    "QueueConfig",
    "QueueFull",
    "QueueOptions",
    "ReginaError",
    "RenewResult",
    "ReplayResult",
    "StartError",
    "TransactionResult",
    "TxAckResult",
    "TxPushResult",
    "Unavailable",
]
