"""Queue administration: configure and delete."""

from __future__ import annotations

from reginamq.common.errors import BadRequest
from reginamq.engine import queues
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request


async def configure(broker: Broker, request: Request) -> responses.Response:
    body = request.json(queues.ConfigureBody)
    if (body.options or {}).get("encryptionEnabled") is True and not broker.sealer.has_key:
        raise BadRequest("encryptionEnabled needs an encryption key on the broker (REGINAMQ_ENCRYPTION_KEY, "
                         "64 hex characters); this one has none, so it could not serve the queue")
    return responses.json(200, await queues.configure(broker.store, body))


async def delete_queue(broker: Broker, request: Request) -> responses.Response:
    name = request.path_params["queue"]
    return responses.json(200, await queues.delete(broker.store, name))
