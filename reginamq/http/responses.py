"""The few answer shapes every handler returns: (status, body bytes or None)."""

from __future__ import annotations

from typing import Any

import orjson

Response = tuple[int, bytes | None]


def json(status: int, value: Any) -> Response:
    return status, orjson.dumps(value)


def error(status: int, message: str, **extra: Any) -> Response:
    return status, orjson.dumps({"error": message, **extra})


NO_CONTENT: Response = (204, None)
