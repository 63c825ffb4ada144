"""What the operator views (resources, consumer groups) share: a page of a listing, the way
they write a moment, and the refusal for what does not exist."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from reginamq.common.errors import BadRequest


@dataclasses.dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def stamp(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC to the millisecond, ``Z``-suffixed; ``None`` stays ``None``."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def not_found(message: str) -> BadRequest:
    return BadRequest(message, status=404)
