"""What the operator views (resources, consumer groups) share: a page of a listing and the
refusal for what does not exist."""

from __future__ import annotations

import dataclasses

from reginamq.common.errors import BadRequest


@dataclasses.dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def not_found(message: str) -> BadRequest:
    return BadRequest(message, status=404)
