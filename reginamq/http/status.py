"""Health: 200 while the database answers, 503 while it does not."""

from __future__ import annotations

from reginamq import __version__
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.runtime import Broker


async def health(broker: Broker, request: Request) -> responses.Response:
    if await broker.healthy():
        return responses.json(200, {"status": "healthy", "database": "connected", "version": __version__})
    return responses.json(503, {"status": "unhealthy", "database": "disconnected", "version": __version__})
