"""The route table: method, path pattern, handler, and the role the route requires.

``{name}`` is one path segment; ``{name*}`` (last only) takes the rest of the path, slashes
included, because clients put partition names into URLs unencoded. Paths arrive decoded.

The role (see reginamq/security/roles.py) sits in the same tuple as the handler so that a
route cannot be added without deciding who may call it; the app enforces it when the broker
runs with ``--auth jwt``, and docs/security.md and /openapi.json are checked against it.

GET /openapi.json is answered here: the OpenAPI builder (reginamq/http/openapi.py) is handed
this table and never imports it, and the document is built on the first request and kept.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from reginamq.engine.broker import Broker
from reginamq.http import (
    analytics,
    console,
    consumer_groups,
    dlq,
    ephemeral,
    kv,
    locks,
    message_admin,
    messages,
    openapi,
    queues,
    reads,
    resources,
    status,
    streams,
    timers,
    traces,
)
from reginamq.http.request import Request
from reginamq.http.responses import Response
from reginamq.security.roles import ADMIN, PUBLIC, READ_ONLY, READ_WRITE, REQUIREMENTS, WRITE_ONLY

Handler = Callable[[Broker, Request], Awaitable[Response]]


class Route(NamedTuple):
    method: str
    pattern: str
    handler: Handler
    role: str  # what the caller's token must grant: a name from reginamq.security.roles


async def describe(broker: Broker, request: Request) -> Response:
    """GET /openapi.json: this route table's OpenAPI document."""
    return 200, _description()


@functools.cache
def _description() -> bytes:
    return openapi.document(ROUTES)


def table(*entries: tuple) -> list[Route]:
    """The routes, each checked to name a known role: a typo would otherwise lock a route or open it."""
    routes = []
    for entry in entries:
        if len(entry) != 4 or entry[3] not in REQUIREMENTS:
            raise ValueError(f"route {entry[:2]}: a route is (method, pattern, handler, role) with role one of "
                             f"{sorted(REQUIREMENTS)}")
        routes.append(Route(*entry))
    return routes


ROUTES: list[Route] = table(
    ("POST", "/api/v1/push", messages.push, WRITE_ONLY),
    ("GET", "/api/v1/pop", messages.pop_discovery, READ_WRITE),
    ("GET", "/api/v1/pop/queue/{queue}", messages.pop_queue, READ_WRITE),
    ("GET", "/api/v1/pop/queue/{queue}/partition/{partition*}", messages.pop_partition, READ_WRITE),
    ("POST", "/api/v1/ack", messages.ack, READ_WRITE),
    ("POST", "/api/v1/ack/batch", messages.ack_batch, READ_WRITE),
    ("POST", "/api/v1/lease/{leaseId}/extend", messages.extend_lease, READ_WRITE),
    ("POST", "/api/v1/transaction", messages.transaction, READ_WRITE),
    ("POST", "/api/v1/configure", queues.configure, READ_WRITE),
    ("DELETE", "/api/v1/resources/queues/{queue}", queues.delete_queue, ADMIN),
    # Load balancers and orchestrators probe it without credentials; it tells only "up".
    ("GET", "/health", status.health, PUBLIC),
    # Liveness as Queen serves it: read-only like Queen's, so only probes holding a token see it.
    ("GET", "/status", status.alive, READ_ONLY),
    # The protocol's description: the same for every broker, no data and no secrets in it.
    ("GET", "/openapi.json", describe, PUBLIC),
    *dlq.ROUTES,
    *resources.ROUTES,
    *consumer_groups.ROUTES,
    *message_admin.ROUTES,
    *reads.ROUTES,
    *streams.ROUTES,
    *kv.ROUTES,
    *locks.ROUTES,
    *timers.ROUTES,
    *ephemeral.ROUTES,
    *traces.ROUTES,
    *analytics.ROUTES,
    *console.ROUTES,
)


class Router:
    def __init__(self, routes: list[Route]):
        self._static: dict[str, dict[str, Route]] = {}
        self._dynamic: list[tuple[list[str], Route]] = []
        for route in routes:
            if "{" in route.pattern:
                self._dynamic.append((route.pattern.strip("/").split("/"), route))
            else:
                self._static.setdefault(route.pattern, {})[route.method] = route

    def match(self, method: str, raw_path: str) -> tuple[Route | None, dict[str, str], bool]:
        """Returns (route, path parameters, whether the path exists for some other method)."""
        path = raw_path.rstrip("/") or "/"
        methods = self._static.get(path)
        if methods is not None and method in methods:
            return methods[method], {}, True
        # A static path does not hide a pattern for another method (DELETE of a group named "lagging").
        segments = path.strip("/").split("/")
        path_known = methods is not None
        for pattern, route in self._dynamic:
            params = _bind(pattern, segments)
            if params is None:
                continue
            if route.method == method:
                return route, params, True
            path_known = True
        return None, {}, path_known


def _bind(pattern: list[str], segments: list[str]) -> dict[str, str] | None:
    greedy = pattern[-1].endswith("*}")
    if len(segments) < len(pattern) if greedy else len(segments) != len(pattern):
        return None
    params = {}
    for position, expected in enumerate(pattern):
        if greedy and position == len(pattern) - 1:
            params[expected[1:-2]] = "/".join(segments[position:])
        elif expected.startswith("{"):
            params[expected[1:-1]] = segments[position]
        elif expected != segments[position]:
            return None
    return None if "" in params.values() else params


ROUTER = Router(ROUTES)
