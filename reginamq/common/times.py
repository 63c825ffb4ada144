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


# Moments a caller may give: a margin inside Python's and PostgreSQL's ranges, so that
# arithmetic on them (an hour before, a zone shift) cannot overflow.
EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def check_moment(value: datetime) -> datetime:
    """``value`` within EARLIEST..LATEST (without a zone: UTC); ValueError otherwise."""
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    if not EARLIEST <= value <= LATEST:
        raise ValueError(value.isoformat())
    return value


def moment(raw: str) -> datetime:
    """``now`` or an ISO-8601 moment (without a zone: UTC) within EARLIEST..LATEST; ValueError
    otherwise."""
    if raw == "now":
        return datetime.now(UTC)
    return check_moment(datetime.fromisoformat(raw))
