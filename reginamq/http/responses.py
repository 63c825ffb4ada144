"""The few answer shapes every handler returns: (status, body bytes or None).

Handlers return plain tuples, which the app (reginamq/http/app.py) writes out as they are:
JSON unless a content type is given. Errors are always ``{"error": message, ...}``. JSON is
written by orjson; a value orjson cannot write (an integer past 64 bits, which a stored key
or value may hold) is written by msgspec, exactly.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

# (status, body) answers JSON; (status, body, content type) anything else; a fourth item adds
# response headers (pairs of str), e.g. the WWW-Authenticate challenge of a 401.
Response = tuple[int, bytes | None] | tuple[int, bytes, str] | tuple[int, bytes, str, list[tuple[str, str]]]
JSON = "application/json"


def json(status: int, value: Any) -> Response:
    try:
        return status, orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer past 64 bits (a stored key/value): msgspec writes it exactly
        return status, msgspec.json.encode(value)


def error(status: int, message: str, **extra: Any) -> Response:
    return status, orjson.dumps({"error": message, **extra})


def text(status: int, body: bytes, content_type: str) -> Response:
    return status, body, content_type


NO_CONTENT: Response = (204, None)


def with_header(answer: Response, name: str, value: str) -> Response:
    """``answer`` with one more response header."""
    content_type = answer[2] if len(answer) > 2 else JSON
    headers = list(answer[3]) if len(answer) > 3 else []
    return answer[0], answer[1] or b"", content_type, [*headers, (name, value)]
