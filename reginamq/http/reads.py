"""Reads by offset (POST /api/v1/fetch) and partition discovery (POST /api/v1/partitions/changed).

What queen-mq's ``queue(...).fetch()`` and ``.changed_since()`` call (its ``reads`` module);
the engine side is engine/reads.py. Both are reads: no lease, no cursor, no ack.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.common.errors import BadRequest
from reginamq.common.times import check_moment
from reginamq.engine import reads
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY


async def fetch(broker: Broker, request: Request) -> responses.Response:
    body = request.json(reads.FetchBody)
    return responses.json(200, await reads.fetch(broker.store, body, broker.sealer.reveal))


async def partitions_changed(broker: Broker, request: Request) -> responses.Response:
    entries = request.json(reads.ChangedBody).entries
    queries = [reads.changed_query(entry, None if entry.since is None else _since(entry.since)) for entry in entries]
    return responses.json(200, await reads.changed(broker.store, queries))


def _since(raw: str):
    try:
        return check_moment(datetime.fromisoformat(raw))
    except ValueError:
        raise BadRequest("since must be an ISO-8601 timestamp") from None


ROUTES: list = [
    ("POST", "/api/v1/fetch", fetch, READ_ONLY),
    ("POST", "/api/v1/partitions/changed", partitions_changed, READ_ONLY),
]
