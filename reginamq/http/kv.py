"""POST /api/v1/kv: queen-mq's ``client.kv`` (engine/kv.py); and GET, PUT and DELETE
/api/v1/kv/:ns/:key, one op each, for what people write by hand with curl (the key may hold
'/'). The HTTP status says how the call went, never what an op answered: a missing key, a lost
race and a refused increment are 200s with the verdict in the op's result.

The path routes take no query string (a key prefix or a value in a URL ends up in every access
log on the way) and a body does not name the op, namespace or key (the URL does); a GET that
found the key answers its version as the ETag."""

from __future__ import annotations

import msgspec

from reginamq.common.errors import refuse
from reginamq.engine import kv, op_batch
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY, READ_WRITE


class KvBody(msgspec.Struct):
    operations: list[msgspec.Raw]


async def _run(broker: Broker, prepared: op_batch.OpBatch) -> dict | list[dict]:
    """The results, or the verdict of a ``required`` op that lost (the call rolled back)."""
    try:
        return await op_batch.alone(broker.store, kv.apply, prepared)
    except kv.PreconditionLost as lost:
        return {**lost.answer(lost.index), "results": []}


async def apply(broker: Broker, request: Request) -> responses.Response:
    """200 ``{"results": [...]}``, one per op in order; a ``required`` op that lost rolls the call
    back and answers 200 ``{"ok": false, "reason": "kv_precondition", "failedIndex", ...}``."""
    answer = await _run(broker, kv.prepare(request.json(KvBody).operations))
    return responses.json(200, answer if isinstance(answer, dict) else {"results": answer})


async def _one(broker: Broker, request: Request, op: str, allowed: tuple[str, ...] = (), *,
               body: bool = False) -> dict:
    """The route's one op: ``allowed`` fields of the body (``body``: required, else optional)
    and the namespace and key of the URL."""
    if request.query_string:
        refuse("kv_no_query_string", "the key/value path routes take no query parameters; prefix reads are "
                                     "in the POST /api/v1/kv body")
    fields = (request.json(dict[str, msgspec.Raw], allow_empty=not body) or {}) if allowed else {}
    shadowing = next((name for name in ("op", "ns", "namespace", "key") if name in fields), None)
    if shadowing is not None:
        refuse("kv_field_in_path", f"{shadowing} is taken from the URL on this route")
    params = request.path_params
    op_fields = {name: fields[name] for name in allowed if name in fields}
    raw = msgspec.json.encode({**op_fields, "op": op, "ns": params["ns"], "key": params["key"]})
    answer = await _run(broker, kv.prepare([msgspec.Raw(raw)]))
    return answer if isinstance(answer, dict) else answer[0]


async def get_one(broker: Broker, request: Request) -> responses.Response:
    """The get result; a found key's version is the ETag (it saves bytes, not the database)."""
    result = await _one(broker, request, "get")
    if not result.get("found"):
        return responses.json(200, result)
    return 200, responses.json(200, result)[1], responses.JSON, [("etag", f'"{result["version"]}"')]


async def put_one(broker: Broker, request: Request) -> responses.Response:
    """A put of ``{value, ttlSeconds | forever, expect?, required?}``."""
    allowed = ("value", "ttlSeconds", "forever", "expect", "required")
    return responses.json(200, await _one(broker, request, "put", allowed, body=True))


async def delete_one(broker: Broker, request: Request) -> responses.Response:
    """A delete, with an optional body ``{expect?, required?}``."""
    return responses.json(200, await _one(broker, request, "delete", ("expect", "required")))


ROUTES: list = [
    ("POST", "/api/v1/kv", apply, READ_WRITE),
    ("GET", "/api/v1/kv/{ns}/{key*}", get_one, READ_ONLY),
    ("PUT", "/api/v1/kv/{ns}/{key*}", put_one, READ_WRITE),
    ("DELETE", "/api/v1/kv/{ns}/{key*}", delete_one, READ_WRITE),
]
