"""Minimal push/pop-shaped app in three server interfaces (ASGI, RSGI, aiohttp).

Routes (identical behaviour in each interface):
  POST /api/v1/push                     -> decode {"items":[...]} with msgspec Structs,
                                           answer 201 + orjson array of per-item results
  GET  /api/v1/pop/queue/q?batch=100    -> answer 200 + prebuilt ~30 KB JSON body
Anything else -> 404.

Entry points:
  asgi app    : apps:asgi_app      (granian --interface asgi, uvicorn)
  rsgi app    : apps:rsgi_app      (granian --interface rsgi)
  aiohttp app : apps:make_aiohttp_app()  (web.run_app)
"""
from __future__ import annotations

import uuid

import msgspec
import orjson


class PushItem(msgspec.Struct):
    queue: str
    partition: str
    payload: msgspec.Raw
    transactionId: str


class PushBody(msgspec.Struct):
    items: list[PushItem]


_push_decoder = msgspec.json.Decoder(PushBody)

# Pre-generated ids so the benchmark measures the server, not uuid4().
_MSG_IDS = [str(uuid.UUID(int=i + 1)) for i in range(1000)]  # 36 chars each


def handle_push(body: bytes) -> tuple[int, bytes]:
    try:
        req = _push_decoder.decode(body)
    except msgspec.ValidationError as exc:
        return 400, orjson.dumps({"error": str(exc)})
    except msgspec.DecodeError as exc:
        return 400, orjson.dumps({"error": str(exc)})
    ids = _MSG_IDS
    out = [
        {
            "index": i,
            "message_id": ids[i % 1000],
            "transaction_id": it.transactionId,
            "queueName": it.queue,
            "status": "queued",
        }
        for i, it in enumerate(req.items)
    ]
    return 201, orjson.dumps(out)


def _build_pop_body(n: int = 100) -> bytes:
    """~30 KB pop answer: a join of stored per-message JSON bytes (~300 B each)."""
    parts = []
    for i in range(n):
        msg = {
            "transactionId": f"tx-{i:08d}-0000-0000-0000-000000000000",
            "partitionId": "00000000-0000-0000-0000-000000000001",
            "queue": "q",
            "partition": "Default",
            "createdAt": "2026-11-30T12:00:00.000Z",
            "data": {"seq": i, "kind": "bench", "body": "x" * 90},
        }
        parts.append(orjson.dumps(msg))
    return b'{"messages":[' + b",".join(parts) + b'],"leaseId":"00000000-0000-0000-0000-00000000abcd"}'


POP_BODY: bytes = _build_pop_body()

PUSH_PATH = "/api/v1/push"
POP_PATH = "/api/v1/pop/queue/q"
NOT_FOUND = b'{"error":"not found"}'


# --------------------------------------------------------------------------- ASGI
_ASGI_JSON_HDRS = [(b"content-type", b"application/json")]


async def asgi_app(scope, receive, send):
    t = scope["type"]
    if t == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if t != "http":
        return
    path = scope["path"]
    method = scope["method"]
    if method == "POST" and path == PUSH_PATH:
        chunks = []
        more = True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        status, out = handle_push(body)
    elif method == "GET" and path == POP_PATH:
        status, out = 200, POP_BODY
    else:
        status, out = 404, NOT_FOUND
    await send({"type": "http.response.start", "status": status, "headers": _ASGI_JSON_HDRS})
    await send({"type": "http.response.body", "body": out})


# --------------------------------------------------------------------------- RSGI
_RSGI_JSON_HDRS = [("content-type", "application/json")]


async def rsgi_app(scope, protocol):
    path = scope.path
    method = scope.method
    if method == "POST" and path == PUSH_PATH:
        body = await protocol()
        status, out = handle_push(body)
    elif method == "GET" and path == POP_PATH:
        status, out = 200, POP_BODY
    else:
        status, out = 404, NOT_FOUND
    protocol.response_bytes(status, _RSGI_JSON_HDRS, out)


# ------------------------------------------------------------------------ aiohttp
def make_aiohttp_app():
    from aiohttp import web

    async def push(request: web.Request) -> web.Response:
        body = await request.read()
        status, out = handle_push(body)
        return web.Response(status=status, body=out, content_type="application/json")

    async def pop(request: web.Request) -> web.Response:
        return web.Response(status=200, body=POP_BODY, content_type="application/json")

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post(PUSH_PATH, push)
    app.router.add_get(POP_PATH, pop)
    return app


def make_push_body(n: int = 100) -> bytes:
    """Precomputed ~30 KB push request body used by the load generator."""
    items = [
        {
            "queue": "q",
            "partition": "Default",
            "payload": {"seq": i, "kind": "bench", "body": "y" * 160},
            "transactionId": f"tx-{i:08d}-0000-0000-0000-000000000000",
        }
        for i in range(n)
    ]
    return orjson.dumps({"items": items})


if __name__ == "__main__":
    print("pop body bytes:", len(POP_BODY))
    print("push body bytes:", len(make_push_body()))
    s, o = handle_push(make_push_body())
    print("push answer:", s, len(o), o[:160])
