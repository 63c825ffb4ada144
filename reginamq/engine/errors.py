"""Errors the engine raises for the HTTP layer to turn into 4xx answers."""


class BadRequest(Exception):
    """The client sent something the protocol does not allow; nothing was changed."""

    status = 400

    def __init__(self, message: str, *, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.status = status
        self.extra = extra or {}


class Unavailable(Exception):
    """The database cannot be reached: a 503 that a retry may fix."""
