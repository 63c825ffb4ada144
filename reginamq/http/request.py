"""What a handler sees of a request, and typed access to its query string and JSON body."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import parse_qs

import msgspec

from reginamq.common import jsonlimits
from reginamq.common.errors import BadRequest
from reginamq.common.times import EARLIEST, LATEST, moment

T = TypeVar("T")
D = TypeVar("D")
JSON_TYPES = ("application/json", "text/plain", "+json")
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


@dataclasses.dataclass
class Request:
    method: str
    path_params: dict[str, str]
    query_string: bytes
    content_type: str | None
    body: bytes
    # Completes when the client hangs up; only long polls ask for it.
    wait_disconnect: Callable[[], Awaitable[object]] | None = None
    # The verified token's ``sub`` (auth on), stamped on pushed messages as producerSub.
    subject: str | None = None
    # The client's address and port: tells push fusion which requests follow their own answer.
    connection: object = None
    _query: dict[str, list[str]] | None = None

    def query(self, name: str) -> str | None:
        if self._query is None:
            try:
                self._query = parse_qs(self.query_string.decode("utf-8", "strict"), keep_blank_values=True,
                                       errors="strict")
            except UnicodeDecodeError:
                raise BadRequest("the query string is not valid UTF-8") from None
        values = self._query.get(name)
        return values[-1] if values else None

    def query_integer(self, name: str) -> int | None:
        """The parameter as an integer (None: not given), its range left to whoever uses it."""
        raw = self.query(name)
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except ValueError:
            raise BadRequest(f"query parameter {name} must be an integer, got {raw[:40]!r}") from None

    def query_int(self, name: str, default: D, low: int, high: int) -> int | D:
        value = self.query_integer(name)
        if value is None:
            return default
        if not low <= value <= high:
            raise BadRequest(f"query parameter {name} must be between {low} and {high}")
        return value

    def query_bool(self, name: str, default: D) -> bool | D:
        raw = self.query(name)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise BadRequest(f"query parameter {name} must be true or false")

    def query_timestamp(self, name: str) -> datetime | None:
        raw = self.query(name)
        if raw is None or raw == "":
            return None
        try:
            return moment(raw)
        except ValueError:
            raise BadRequest(f"query parameter {name} must be 'now' or an ISO-8601 timestamp "
                             f"between {EARLIEST.year} and {LATEST.year}") from None

    def json(self, shape: type[T], *, allow_empty: bool = False) -> T | None:
        """Decode the body into ``shape``; a body that does not fit is a 400 that names the field."""
        if not self.body:
            if allow_empty:
                return None
            raise BadRequest("a JSON body is required")
        if self.content_type and not self.content_type.split(";")[0].strip().lower().endswith(JSON_TYPES):
            raise BadRequest(f"unsupported Content-Type {self.content_type!r}: send application/json",
                             status=415)
        return decode_json(self.body, shape)


def decode_json(body: bytes, shape: type[T]) -> T:
    """Strict JSON (jsonlimits) into ``shape``; a body that does not fit is a 400 naming the field."""
    jsonlimits.check(body)
    try:
        return msgspec.json.decode(body, type=shape)
    except msgspec.ValidationError as error:
        raise BadRequest(f"invalid request body: {error}") from None
    except msgspec.DecodeError as error:
        raise BadRequest(f"malformed JSON: {error}") from None


def json_object(request: Request) -> dict[str, Any]:
    body = request.json(dict[str, Any], allow_empty=True)
    return body or {}
