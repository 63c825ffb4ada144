"""The library's exceptions: each carries the HTTP status an HTTP client would see for the same
call (``status``), the answer's ``error`` text and the answer's other keys (``extra``).

:func:`translate` maps what the engine raises exactly as the HTTP app's error contract does
(http/app.py): a refusal keeps its status and keys, the database being away is a 503, a value
that does not fit its type is a 400, and anything else is a 500 whose original is kept as
``__cause__``. :func:`from_answer` builds the same exception from an HTTP answer, so code that
talks to a broker over HTTP can raise what the library raises.

Partial outcomes (a rejected ack, a failed renewal, a rolled-back transaction) are results,
never exceptions: an exception means the call as a whole was refused or could not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from reginamq.common import errors as common


class ReginaError(Exception):
    """The base of every library exception."""

    status: int = 500

    def __init__(self, error: str, *, status: int | None = None, extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(error)
        self.error = error
        if status is not None:
            self.status = status
        self.extra: Mapping[str, Any] = dict(extra or {})


class InvalidRequest(ReginaError):
    """A name, bound or value the protocol does not allow; nothing was changed (400)."""

    status = 400


class NotFound(ReginaError):
    """What the call names does not exist, e.g. a dead letter already replayed (404)."""

    status = 404


class Conflict(ReginaError):
    """The call cannot apply to the state it found, e.g. a dead letter whose partition is gone (409)."""

    status = 409


class QueueFull(Conflict):
    """A push would take queues past their ``maxSize``; nothing of it was written (409)."""

    @property
    def queues(self) -> list[dict[str, Any]]:
        """Per full queue: its name, ``maxSize``, ``size`` and the ``incoming`` count."""
        return list(self.extra.get("queues", []))

    @property
    def items(self) -> list[dict[str, Any]]:
        """Per pushed item: ``rejected`` (its queue is full) or ``not_written``."""
        return list(self.extra.get("items", []))


class PayloadTooLarge(ReginaError):
    """More than 10 000 items, acks or operations in one call, or a payload over 4 MiB (413)."""

    status = 413


class Unavailable(ReginaError):
    """The database cannot be reached (and the spool could not take the push); a retry may
    succeed (503)."""

    status = 503


class BrokerClosed(Unavailable):
    """The broker is closing or closed: it takes no new calls."""


class InternalError(ReginaError):
    """Something unexpected failed; the original exception is ``__cause__`` (500)."""

    status = 500


class StartError(ReginaError):
    """The broker could not start (embedded PostgreSQL, database, schema, spool or settings);
    the message says why on one line, as ``reginamq serve`` would."""

    status = 503


_BY_STATUS: dict[int, type[ReginaError]] = {
    400: InvalidRequest, 404: NotFound, 409: Conflict, 413: PayloadTooLarge, 500: InternalError, 503: Unavailable,
}


def _of(status: int, error: str, extra: Mapping[str, Any]) -> ReginaError:
    if status == 409 and extra.get("code") == "queue_full":
        return QueueFull(error, extra=extra)
    kind = _BY_STATUS.get(status, ReginaError)
    return kind(error, status=status, extra=extra)


def translate(error: BaseException) -> ReginaError:
    """The library exception for what a call raised, as HTTP would have answered it."""
    if isinstance(error, ReginaError):
        return error
    if isinstance(error, common.BadRequest):
        return _of(error.status, str(error), error.extra)
    if isinstance(error, common.Unavailable):
        return Unavailable(str(error))
    if isinstance(error, (msgspec.ValidationError, msgspec.DecodeError)):
        return InvalidRequest(f"invalid request: {error}")
    internal = InternalError("internal error")
    internal.__cause__ = error
    return internal


def from_answer(status: int, body: bytes | Mapping[str, Any]) -> ReginaError:
    """The exception for an HTTP error answer (``{"error": ..., ...}``)."""
    if not isinstance(body, Mapping):
        try:
            decoded = msgspec.json.decode(body) if body else {}
        except msgspec.DecodeError:
            decoded = {"error": body.decode(errors="replace")}
        body = decoded if isinstance(decoded, Mapping) else {"error": str(decoded)}
    extra = {key: value for key, value in body.items() if key != "error"}
    return _of(status, str(body.get("error", "")), extra)
