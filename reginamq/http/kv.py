"""POST /api/v1/kv: queen-mq's ``client.kv`` (engine/kv.py). The HTTP status says how the call
went, never what an op answered: a missing key, a lost race and a refused increment are 200s
with the verdict in the op's result."""

from __future__ import annotations

import msgspec

from reginamq.engine import kv
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.runtime import Broker
from reginamq.security.roles import READ_WRITE


class KvBody(msgspec.Struct):
    operations: list[msgspec.Raw]


async def apply(broker: Broker, request: Request) -> responses.Response:
    """200 ``{"results": [...]}``, one per op in order; a ``required`` op that lost rolls the call
    back and answers 200 ``{"ok": false, "reason": "kv_precondition", "failedIndex", ...}``."""
    prepared = kv.prepare(request.json(KvBody).operations)
    try:
        results = await broker.run(lambda conn: kv.call(conn, prepared))
    except kv.PreconditionLost as lost:
        return responses.json(200, {**lost.answer(lost.index), "results": []})
    return responses.json(200, {"results": results})


ROUTES: list = [
    ("POST", "/api/v1/kv", apply, READ_WRITE),
]
