"""Reads by offset and partition discovery: Queen 2.x's ``fetch`` and ``changed_since``.

A partition here is already a log: offsets from 0, segments keyed by their first offset,
``last_offset`` and the oldest kept offset on the partition row. So a fetch reads the
segments from an offset on, within a byte budget, and answers each record as
``{offset, transactionId, payload, ts}``, and discovery pages through the partitions of a
queue in creation order. Neither takes a lease, moves a cursor or needs an ack; neither is
seen by any consumer group. Deleted messages (tombstones) are left out, so a read may skip
offsets; the reader goes on from one past the last record (as queen-mq's loop does).

Errors are per entry, in the words of queen-mq's reads module: ``UNKNOWN_TOPIC_OR_PARTITION``
(no such queue or partition) and ``OFFSET_OUT_OF_RANGE`` (below the oldest kept offset, or past
the end); each entry still carries ``highWatermark`` (the next offset the partition will
assign) and ``logStartOffset`` (the oldest kept).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import msgspec
import orjson

from reginamq.common.errors import BadRequest
from reginamq.common.times import iso_millis
from reginamq.engine.names import check_name, check_queue_name
from reginamq.store import Store

MAX_ENTRIES = 1024
ENTRY_BYTES = 8 * 1024 * 1024  # the most one entry reads; a larger maxBytes is read as this
CALL_BYTES = 16 * 1024 * 1024  # the most one call reads
MAX_PAGE = 1000
UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION"
OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"


Offset = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Bytes = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]


class FetchEntry(msgspec.Struct):
    queue: str
    partition: str
    offset: Offset = 0
    maxBytes: Bytes = ENTRY_BYTES


class FetchBody(msgspec.Struct):
    entries: Annotated[list[FetchEntry], msgspec.Meta(min_length=1, max_length=MAX_ENTRIES)]
    maxBytes: Bytes = CALL_BYTES


class ChangedEntry(msgspec.Struct):
    queue: str
    since: str | None = None
    after: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE)] = MAX_PAGE


class ChangedBody(msgspec.Struct):
    entries: Annotated[list[ChangedEntry], msgspec.Meta(min_length=1, max_length=MAX_ENTRIES)]


async def fetch(store: Store, body: FetchBody, reveal) -> dict:
    """Every entry's records from its offset on, within its byte budget and the call's."""
    entries, call_budget = body.entries, min(body.maxBytes, CALL_BYTES)
    for entry in entries:
        check_queue_name(entry.queue)
        check_name("partition", entry.partition)
    budgets = [min(e.maxBytes, ENTRY_BYTES) for e in entries]
    rows = await store.reads.records([e.queue for e in entries], [e.partition for e in entries],
                                     [e.offset for e in entries], budgets, call_budget)
    answers = [{"queue": e.queue, "partition": e.partition, "records": [], "highWatermark": 0,
                "logStartOffset": 0, "nextOffset": e.offset} for e in entries]
    used, call_left = [0] * len(entries), call_budget
    for row in rows:
        at = row[0] - 1
        entry, answer = entries[at], answers[at]
        if not row[1]:
            answer["error"] = UNKNOWN
        elif row[4] is None:
            answer["highWatermark"], answer["logStartOffset"] = row[2], row[3]
            if not row[3] <= entry.offset <= row[2]:
                answer["error"] = OUT_OF_RANGE
        elif call_left > 0:
            added = _records(answer, entry.offset, min(budgets[at] - used[at], call_left), row, reveal,
                             always_one=call_left == call_budget)
            used[at] += added
            call_left -= added
    return {"entries": answers}


def _records(answer: dict, start: int, budget: int, row, reveal, always_one: bool) -> int:
    """Add one segment's records from offset ``start`` on, skipping tombstones, while their
    stored size stays within ``budget``. The call's first record goes whatever its size
    (``always_one``): a read must make progress; later entries that do not fit get nothing and
    are asked again (queen-mq's loop does). Returns the bytes added."""
    base, stamp, txids, payloads, deleted = row[4], iso_millis(row[5]).decode(), row[6], row[7], set(row[8])
    records, added = answer["records"], 0
    for index, fragment in enumerate(payloads):
        offset = base + index
        if offset < start or offset in deleted:
            continue
        if added + len(fragment) > budget and not (always_one and not added):
            break
        added += len(fragment)
        message = orjson.loads(b"{" + reveal(fragment) + b"}")
        records.append({"offset": offset, "transactionId": txids[index], "payload": message["data"], "ts": stamp})
        answer["nextOffset"] = offset + 1
    return added


def _cursor(created_at: datetime, partition_id: str) -> str:
    """The page cursor (``next``, sent back as ``after``): where the page ended, in creation order."""
    return f"{created_at.isoformat()}|{partition_id}"


def _parse_cursor(raw: str) -> tuple[datetime, str]:
    try:
        created, partition_id = raw.split("|", 1)
        moment = datetime.fromisoformat(created)
        if moment.tzinfo is None:
            raise ValueError("no zone")
        return moment, str(uuid.UUID(partition_id))
    except ValueError:
        raise BadRequest("after must be the next cursor of an earlier answer") from None


class ChangedQuery(msgspec.Struct):
    queue: str
    since: datetime | None
    after: tuple[datetime, str] | tuple[None, None]
    limit: int


def changed_query(entry: ChangedEntry, since: datetime | None) -> ChangedQuery:
    check_queue_name(entry.queue)
    return ChangedQuery(entry.queue, since, (None, None) if entry.after is None else _parse_cursor(entry.after),
                        entry.limit)


async def changed(store: Store, queries: list[ChangedQuery]) -> dict:
    """Each query's page of partitions, and the smallest safe time of the pages."""
    answers, safe = [], None
    for query in queries:
        rows = await store.reads.changed(query.queue, query.since, *query.after, query.limit)
        safe = rows[0][1] if safe is None else min(safe, rows[0][1])
        if not rows[0][0]:
            answers.append({"queue": query.queue, "partitions": [], "next": None, "error": UNKNOWN})
            continue
        found = [row for row in rows if row[2] is not None]
        page = found[:query.limit]
        answers.append({
            "queue": query.queue,
            "partitions": [{"name": row[3], "id": row[2], "lastOffset": row[4], "logStart": row[5],
                            "lastWriteAt": None if row[6] is None else iso_millis(row[6]).decode()}
                           for row in page],
            "next": _cursor(page[-1][7], page[-1][2]) if len(found) > query.limit else None,
        })
    return {"entries": answers, "safeTime": iso_millis(safe).decode()}
