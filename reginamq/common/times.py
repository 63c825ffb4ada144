"""How an answer writes a moment: ISO 8601 in UTC to the millisecond, ``Z``-suffixed, as
Queen's servers write them and queen-mq parses them."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_millis(moment: datetime) -> bytes:
    """A moment in UTC (as the store returns every timestamp) as bytes, for answers assembled
    from stored bytes (pop, browse, reads): on the pop path, so it converts nothing."""
    return (moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z").encode()


def stamp(moment: datetime | None) -> str | None:
    """The moment as a string for JSON answers; ``None`` stays ``None``."""
    return None if moment is None else iso_millis(moment.astimezone(UTC)).decode()
