"""Errors any layer raises for the HTTP layer to turn into 4xx (or 503) answers."""

from typing import NoReturn


class BadRequest(Exception):
    """The client sent something the protocol does not allow; nothing was changed."""

    status = 400

    def __init__(self, message: str, *, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.status = status
        self.extra = extra or {}


def refuse(code: str, detail: str, status: int = 400) -> NoReturn:
    """Refuse with a stable code as ``error`` and the prose as ``detail``: Queen 2.x's surfaces
    (key/value, locks, timers) answer that way, and queen-mq reads the code from ``error``."""
    raise BadRequest(code, status=status, extra={"detail": detail})


class Unavailable(Exception):
    """The database cannot be reached: a 503 that a retry may fix."""


class Refused(BadRequest):
    """A push refused for something of its own (not the database's state of health): push
    fusion must answer it to its request alone, never to the requests fused with it."""


class QueueFull(Refused):
    """A push would take queues past their maxSize: nothing of it was written.

    ``full`` is what the database reported per queue (queue, maxSize, size, incoming); the
    per-item detail is added by whoever knows the request's items."""

    def __init__(self, full: list[dict]):
        names = ", ".join(f"{entry['queue']} ({entry['size']} of {entry['maxSize']})" for entry in full)
        super().__init__(f"queue full, nothing was written: {names}", status=409, extra={"code": "queue_full"})
        self.full = full
