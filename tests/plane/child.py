"""A library broker in a process of its own, for the interop tests: ``python -m tests.plane.child
SPOOL_DIR DATABASE_URL...``. It prints ``{"ready": true}`` once started, then takes one JSON
command a line on stdin, ``{"id": 1, "op": "pop", "args": [...], "kwargs": {...}}`` (``op`` a
method of ``reginamq.Broker``; for ``ack`` the first argument is a list of
:class:`reginamq.Ack` fields), runs each as a task of its own (a parked long poll does not hold
up the next command) and answers ``{"id": 1, "result": ...}`` or ``{"id": 1, "error": {...}}``
on stdout, in the order they finish. It closes the broker and exits when stdin closes."""

from __future__ import annotations

import asyncio
import sys

import msgspec

from reginamq.library import Ack, Broker, ReginaError


class Command(msgspec.Struct):
    id: int
    op: str
    args: list = []
    kwargs: dict = {}


def write(answer: dict) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(answer) + b"\n")
    sys.stdout.buffer.flush()


async def run(broker: Broker, command: Command) -> None:
    args = list(command.args)
    if command.op == "ack":
        args[0] = [Ack(**fields) for fields in args[0]]
    try:
        result = await getattr(broker, command.op)(*args, **command.kwargs)
    except ReginaError as error:
        write({"id": command.id, "error": {"class": type(error).__name__, "status": error.status,
                                           "error": error.error, "extra": dict(error.extra)}})
    else:
        write({"id": command.id, "result": result})


async def main(spool: str, urls: list[str]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task] = set()
    async with Broker(urls, maintenance=False, process_metrics=False, environ={}, spool_dir=spool) as broker:
        write({"ready": True})
        while line := await reader.readline():
            task = asyncio.create_task(run(broker, msgspec.json.decode(line, type=Command)))
            running.add(task)
            task.add_done_callback(running.discard)
        for task in list(running):
            task.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
