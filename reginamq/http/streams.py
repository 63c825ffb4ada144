"""Streaming queries (queen-mq's ``Stream.run``): POST /streams/v1/queries, /streams/v1/state/get
and /streams/v1/cycle. The engine side is engine/streams.py."""

from __future__ import annotations

from reginamq.engine import streams
from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import READ_ONLY, READ_WRITE


async def register(broker: Broker, request: Request) -> responses.Response:
    """200 with the query's id; 409 when the name is registered with another operator chain."""
    body = request.json(streams.Register)
    answer = await streams.register(broker.store, body)
    return responses.json(200 if answer["success"] else 409, answer)


async def state(broker: Broker, request: Request) -> responses.Response:
    body = request.json(streams.StateGet)
    return 200, await streams.state(broker.store, body)


async def cycle(broker: Broker, request: Request) -> responses.Response:
    """200 either way: ``success:false`` with the reason when the cycle was rolled back."""
    prepared = streams.prepare(request.json(streams.Cycle), request.subject)
    answer = await streams.cycle(broker.store, prepared, broker.sealer)
    broker.meter.cycled(answer)
    return responses.json(200, answer)


ROUTES: list = [
    ("POST", "/streams/v1/queries", register, READ_WRITE),
    ("POST", "/streams/v1/state/get", state, READ_ONLY),
    ("POST", "/streams/v1/cycle", cycle, READ_WRITE),
]
