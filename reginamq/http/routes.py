"""The route table: method, path pattern, handler.

``{name}`` is one path segment; ``{name*}`` (last only) takes the rest of the path, slashes
included, because clients put partition names into URLs unencoded. Paths arrive decoded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from reginamq.http import browse, dlq, groups, messages, openapi, queues, resources, stats, status, traces
from reginamq.http.request import Request
from reginamq.http.responses import Response
from reginamq.runtime import Broker

Handler = Callable[[Broker, Request], Awaitable[Response]]

ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/api/v1/push", messages.push),
    ("GET", "/api/v1/pop", messages.pop_discovery),
    ("GET", "/api/v1/pop/queue/{queue}", messages.pop_queue),
    ("GET", "/api/v1/pop/queue/{queue}/partition/{partition*}", messages.pop_partition),
    ("POST", "/api/v1/ack", messages.ack),
    ("POST", "/api/v1/ack/batch", messages.ack_batch),
    ("POST", "/api/v1/lease/{leaseId}/extend", messages.extend_lease),
    ("POST", "/api/v1/transaction", messages.transaction),
    ("POST", "/api/v1/configure", queues.configure),
    ("DELETE", "/api/v1/resources/queues/{queue}", queues.delete_queue),
    ("GET", "/health", status.health),
    ("GET", "/openapi.json", openapi.serve),
    *dlq.ROUTES,
    *resources.ROUTES,
    *groups.ROUTES,
    *browse.ROUTES,
    *traces.ROUTES,
    *stats.ROUTES,
]


class Router:
    def __init__(self, routes: list[tuple[str, str, Handler]]):
        self._static: dict[str, dict[str, Handler]] = {}
        self._dynamic: list[tuple[list[str], str, Handler]] = []
        for method, pattern, handler in routes:
            if "{" in pattern:
                self._dynamic.append((pattern.strip("/").split("/"), method, handler))
            else:
                self._static.setdefault(pattern, {})[method] = handler

    def match(self, method: str, raw_path: str) -> tuple[Handler | None, dict[str, str], bool]:
        """Returns (handler, path parameters, whether the path exists for some other method)."""
        path = raw_path.rstrip("/") or "/"
        methods = self._static.get(path)
        if methods is not None and method in methods:
            return methods[method], {}, True
        # A static path does not hide a pattern for another method (DELETE of a group named "lagging").
        segments = path.strip("/").split("/")
        path_known = methods is not None
        for pattern, route_method, handler in self._dynamic:
            params = _bind(pattern, segments)
            if params is None:
                continue
            if route_method == method:
                return handler, params, True
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
