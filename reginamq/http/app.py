"""The application: lifespan, body limits, routing and the error contract, for RSGI and ASGI.

Plain callables rather than a framework: the broker's hot path is HTTP and JSON, and every
layer between the socket and the handler is paid on every request (benchmarks/http_servers
compares the servers). The contract kept here: every failure the client caused is a 4xx with
``{"error": ...}``; a database outage is a 503; unknown paths are 404 no_such_route.
With ``--auth jwt``, each route's declared role is enforced (see guard.py) before its handler
runs; with auth off that costs one attribute check per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Sequence
from typing import Protocol

import msgspec

from reginamq.common.errors import BadRequest, Unavailable
from reginamq.common.signals import DRAIN_SIGNAL
from reginamq.engine import operations, partial
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.analytics import observe_request
from reginamq.http.guard import Guard, Refused
from reginamq.http.request import Request
from reginamq.http.routes import ROUTER
from reginamq.security.tokens import verifier_from

log = logging.getLogger("reginamq.http")
JSON_HEADERS = [(b"content-type", b"application/json")]
RSGI_JSON_HEADERS = [("content-type", "application/json")]


class BodyTooLarge(Exception):
    pass


class Service(Protocol):
    """Something a worker runs beside its routes (the maintenance loops), between the broker's
    start and its stop."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class App:
    def __init__(self, broker: Broker, services: Sequence[Service] = ()):
        self.settings = broker.settings
        self.broker = broker
        self.services = tuple(services)
        verifier = verifier_from(self.settings)
        self.guard = None if verifier is None else Guard(verifier)

    async def start(self) -> None:
        await self.broker.start()
        for service in self.services:
            await service.start()

    async def stop(self) -> None:
        for service in reversed(self.services):
            await service.stop()
        await self.broker.stop()

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
                    await self.start()
                    _on_drain_signal(self.broker.waiters.close, asyncio.get_running_loop())
                except Exception as error:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # RSGI (granian's native interface, the one the broker is served with: see server.py)

    def __rsgi_init__(self, loop) -> None:
        loop.run_until_complete(self.start())
        settle_garbage_collector()
        _on_drain_signal(self.broker.waiters.close, loop)

    def __rsgi_del__(self, loop) -> None:
        loop.run_until_complete(self.stop())

    async def __rsgi__(self, scope, protocol) -> None:
        if scope.proto != "http":
            return

        async def read_body() -> bytes:
            limit = self.settings.max_body_bytes
            declared = scope.headers.get("content-length")
            if declared is None and scope.http_version[0] == "1" and "transfer-encoding" not in scope.headers:
                return b""  # HTTP/1.x: neither a length nor chunks means no body (RFC 9112, 6.3)
            if declared is None or not declared.isdigit() or int(declared) > limit:
                return await _read_chunks(protocol, limit)
            return await protocol()

        status, body, *kind = await self.respond(
            scope.method, scope.path, scope.query_string.encode(), scope.headers.get("content-type"),
            read_body, protocol.client_disconnect,
            None if self.guard is None else scope.headers.get("authorization"), scope.client)
        if body is None:
            protocol.response_empty(status, [])
        elif kind:
            protocol.response_bytes(status, [("content-type", kind[0]), *(kind[1] if len(kind) > 1 else ())], body)
        else:
            protocol.response_bytes(status, RSGI_JSON_HEADERS, body)

    # ASGI (any ASGI server can run the app too)

    async def _http(self, scope, receive, send) -> None:
        status, body, *kind = await self.respond(
            scope["method"], scope["path"], scope.get("query_string", b""), _header(scope, b"content-type"),
            lambda: _read_chunks(_asgi_chunks(receive), self.settings.max_body_bytes), lambda: _disconnected(receive),
            None if self.guard is None else _header(scope, b"authorization"),
            tuple(scope.get("client") or ()) or None)
        if body is None:
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [(b"content-type", kind[0].encode())] if kind else JSON_HEADERS
        headers += [(name.encode(), value.encode()) for name, value in (kind[1] if len(kind) > 1 else ())]
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def respond(self, method: str, path: str, query_string: bytes, content_type: str | None, read_body,
                      wait_disconnect=None, authorization: str | None = None,
                      connection: object = None) -> responses.Response:
        """Route, admit the caller, read the body within its limit, run the handler, keep the error contract."""
        route, params, known = ROUTER.match(method, path)
        if route is None:
            if known:
                return responses.error(405, f"method {method} not allowed on {path}")
            return responses.error(404, "Not Found", code="no_such_route")
        subject = None
        if self.guard is not None:
            try:
                subject = self.guard.admit(route.role, authorization)
            except Refused as refused:
                # The body is read (and dropped) all the same: a client still uploading when the
                # answer goes out would see a broken connection instead of the 401.
                with contextlib.suppress(BodyTooLarge):
                    await read_body()
                return refused.answer
        try:
            body = await read_body()
        except BodyTooLarge:
            return responses.error(413, f"request body larger than {self.settings.max_body_bytes} bytes")
        request = Request(method, params, query_string, content_type, body, wait_disconnect, subject, connection)
        started = time.perf_counter()
        meter = self.broker.meter
        meter.in_flight += 1
        try:
            answer = await self._handle(route.handler, request, method, path)
        finally:
            meter.in_flight -= 1
        meter.requests += 1
        observe_request(method, route.handler.__name__, answer[0], time.perf_counter() - started)
        return answer

    async def _handle(self, handler, request: Request, method: str, path: str) -> responses.Response:
        try:
            with partial.members_left_out() as left_out:
                answer = await handler(self.broker, request)
            if left_out:
                return responses.with_header(answer, *partial.header(left_out))
            return answer
        except BadRequest as error:
            return responses.error(error.status, str(error), **error.extra)
        except Unavailable as error:
            operations.unavailable(self.broker)
            return responses.error(503, str(error))
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            return responses.error(400, f"invalid request: {error}")
        except Exception:
            log.exception("unhandled error on %s %s", method, path)
            return responses.error(500, "internal error")


async def _read_chunks(chunks_of_body, limit: int) -> bytes:
    """Read a body of unknown or excessive size without holding more than ``limit`` bytes.

    An oversized body is still read to its end (and dropped) before the 413 goes out: a
    client that is still uploading when the server answers and closes sees a broken pipe
    instead of the answer.
    """
    chunks, size = [], 0
    async for chunk in chunks_of_body:
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
    if size > limit:
        raise BodyTooLarge
    return b"".join(chunks)


async def _asgi_chunks(receive):
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def settle_garbage_collector() -> None:
    """Keep the cyclic garbage collector off the hot path. Left as it is, every older
    generation's collection walks the long-lived objects start-up made (modules, pools,
    prepared statements), and Python's default threshold runs a young collection many times
    while one large request is parsed. So the start-up objects are frozen out of every
    collection, and young collections run every 50,000 allocations. Nearly all of the broker's
    garbage is freed by reference counting; what forms cycles (exceptions and their
    tracebacks, finished tasks) is still collected, only later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


def _on_drain_signal(callback, loop) -> None:
    """The server's parent asks a stopping worker to answer its long polls now (see server.py)."""
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(DRAIN_SIGNAL, callback)
