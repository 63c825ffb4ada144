"""The ASGI application: lifespan, body limits, routing and the error contract.

A plain ASGI callable rather than a framework: the broker's hot path is HTTP and JSON, and on
a 2-core machine every layer between the socket and the handler shows up in the numbers
(see benchmarks/http_servers). The contract kept here: every failure the client caused is a
4xx with ``{"error": ...}``; a database outage is a 503; unknown paths are 404 no_such_route.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import msgspec

from reginamq.config import Settings
from reginamq.engine.errors import BadRequest, Unavailable
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.http.routes import ROUTER
from reginamq.runtime import Broker

log = logging.getLogger("reginamq.http")
JSON_HEADERS = [(b"content-type", b"application/json")]


class BodyTooLarge(Exception):
    pass


class App:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings.from_env()
        self.broker = Broker(self.settings)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.broker.start()
                    _on_drain_signal(self.broker.waiters.close)
                except Exception as error:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.broker.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope, receive, send) -> None:
        status, body = await self._respond(scope, receive)
        if body is None:
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": status,
                    "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _respond(self, scope, receive) -> responses.Response:
        raw_path = scope.get("raw_path") or scope["path"].encode()
        try:
            path = raw_path.decode("utf-8").split("?", 1)[0]
            handler, params, known = ROUTER.match(scope["method"], path)
        except UnicodeDecodeError:
            return responses.error(400, "the path is not valid UTF-8")
        if handler is None:
            if known:
                return responses.error(405, f"method {scope['method']} not allowed on {path}")
            return responses.error(404, "Not Found", code="no_such_route")
        try:
            body = await _read_body(receive, self.settings.max_body_bytes)
        except BodyTooLarge:
            return responses.error(413, f"request body larger than {self.settings.max_body_bytes} bytes")
        request = Request(scope["method"], params, scope.get("query_string", b""),
                          _header(scope, b"content-type"), body)
        try:
            return await handler(self.broker, request)
        except BadRequest as error:
            return responses.error(error.status, str(error), **error.extra)
        except Unavailable as error:
            return responses.error(503, str(error))
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            return responses.error(400, f"invalid request: {error}")
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], path)
            return responses.error(500, "internal error")


async def _read_body(receive, limit: int) -> bytes:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _on_drain_signal(callback) -> None:
    """The server's parent asks a stopping worker to answer its long polls now (see server.py)."""
    from reginamq.server import DRAIN_SIGNAL

    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(DRAIN_SIGNAL, callback)


def create_app() -> App:
    """Entry point for the HTTP server's worker processes: settings come from the environment."""
    logging.basicConfig(level=Settings.from_env().log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return App()
