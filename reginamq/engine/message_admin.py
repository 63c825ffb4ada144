"""Operator access to single messages: browse with paging, detail, delete, retry.

Messages are stored per segment (see docs/architecture.md), so nothing here moves an offset:

- browse pages in SQL over the segments of the queue (``rq_messages_page``): offsets,
  transactionIds and statuses are computed for the filtered set (for its total), payloads are
  sliced only for the page. A message's answer is its stored fragment plus a suffix, joined as
  bytes: payloads are never decoded.
- status is relative to one reader: the queue-mode cursor, or the named ``consumerGroup``.
  ``dead`` = dead-lettered for that reader, ``completed`` = its cursor is past the message (a
  reader that has not read the partition yet counts from where its cursor would start),
  ``leased`` = inside that reader's live lease, ``pending`` = anything else.
- delete is a tombstone: the slot stays, the fragment loses its data, the offset is recorded
  in ``rq_deleted`` (which the pop path must skip), dead letters and the dedup key go.
- retry appends a copy (new id, same transactionId/traceId/data) to the same partition.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

import orjson
import uuid_utils

from reginamq.common.times import iso_millis
from reginamq.engine.names import QUEUE_MODE
from reginamq.store import Store

STATUSES = ("pending", "leased", "completed", "dead")


@dataclasses.dataclass(frozen=True)
class MessageQuery:
    queue: str
    partition: str | None
    group: str
    status: str | None
    since: datetime | None
    until: datetime | None
    limit: int
    offset: int


def _message(fragment: bytes, partition_id: str, partition: str, queue: bytes, created_at: datetime,
             status: str, group: str) -> bytes:
    return (b"{" + fragment + b',"partitionId":"' + partition_id.encode() + b'","partition":'
            + orjson.dumps(partition) + b',"queue":' + queue + b',"createdAt":"' + iso_millis(created_at)
            + b'","status":"' + status.encode() + b'","consumerGroup":'
            + (b"null" if group == QUEUE_MODE else orjson.dumps(group)) + b"}")


async def page(store: Store, query: MessageQuery, reveal) -> bytes:
    """One page of messages; ``reveal`` opens sealed fragments (see encryption.py)."""
    rows = await store.message_admin.page(query.queue, query.partition, query.group, query.status, query.since,
                                   query.until, query.limit, query.offset)
    queue = orjson.dumps(query.queue)
    messages = [_message(reveal(row[5]), row[0], row[1], queue, row[3], row[4], query.group) for row in rows]
    if rows:
        total = rows[0][6]
    elif query.offset == 0:
        total = 0
    else:  # a page past the end still reports the total of the filtered set
        first = await store.message_admin.page(query.queue, query.partition, query.group, query.status,
                                        query.since, query.until, 1, 0)
        total = first[0][6] if first else 0
    tail = orjson.dumps({"total": total, "limit": query.limit, "offset": query.offset})
    return b'{"messages":[' + b",".join(messages) + b"]," + tail[1:]


async def get(store: Store, partition_id: str, txid: str, group: str, reveal) -> bytes | None:
    row = await store.message_admin.get(partition_id, txid, group)
    if row is None:
        return None
    body = _message(reveal(row["payload"]), partition_id, row["partition_name"], orjson.dumps(row["queue_name"]),
                    row["created_at"], row["status"], group)
    dead = [None if g == QUEUE_MODE else g for g in row["dead_groups"]]
    return body[:-1] + b',"deadLetteredFor":' + orjson.dumps(dead) + b"}"


async def delete(store: Store, partition_id: str, txid: str) -> int:
    return await store.message_admin.delete(partition_id, txid)


async def retry(store: Store, partition_id: str, txid: str) -> dict | None:
    new_id = str(uuid_utils.uuid7())
    row = await store.message_admin.retry(partition_id, txid, new_id)
    if row is None or row["message_offset"] is None:
        return None
    return {"success": True, "messageId": new_id, "transactionId": txid, "partitionId": partition_id,
            "queue": row["queue_name"], "partition": row["partition_name"],
            "removedDeadLetters": row["removed_dead_letters"]}
