"""Queue administration: configure and delete (validated in engine/operations.py)."""

from __future__ import annotations

from reginamq.engine import operations, queues
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request


async def configure(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await operations.configure(broker, request.json(queues.ConfigureBody)))


async def delete_queue(broker: Broker, request: Request) -> responses.Response:
    return responses.json(200, await operations.delete_queue(broker, request.path_params["queue"]))
