"""Health and liveness.

``GET /health`` is readiness: 200 while the database answers, 503 while it does not.
``GET /status`` is liveness, as Queen serves it beside /health: the process is up and routing
requests, whatever the database's state; it touches nothing, so it answers during an outage.
"""

from __future__ import annotations

from reginamq import __version__
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request

ALIVE = responses.json(200, {"status": "ok", "engine": "reginamq"})


async def health(broker: Broker, request: Request) -> responses.Response:
    if await broker.healthy():
        return responses.json(200, {"status": "healthy", "database": "connected", "version": __version__})
    return responses.json(503, {"status": "unhealthy", "database": "disconnected", "version": __version__})


async def alive(broker: Broker, request: Request) -> responses.Response:
    return ALIVE
