"""Queue options: their defaults, their validation and the merge/replace rules of configure.

The complete option set is stored as JSON on the queue row (PostgreSQL derives typed columns
from it for the options the SQL enforces), so the answer to configure echoes exactly what is
stored.
"""

from __future__ import annotations

from typing import Any

from reginamq.common.errors import BadRequest

MAX_SECONDS = 10 * 365 * 24 * 3600
MAX_POP_WAIT_MS = 60_000  # minPopWaitTime is in milliseconds, and a fill wait is short
INT_LIMIT = 2**31 - 1

# name -> (default, kind, minimum, maximum)
_SPEC: dict[str, tuple[Any, type, int, int]] = {
    "leaseTime": (300, int, 1, MAX_SECONDS),
    "retryLimit": (3, int, 0, 1_000_000),
    "deadLetterQueue": (True, bool, 0, 0),
    "dlqAfterMaxRetries": (True, bool, 0, 0),
    "delayedProcessing": (0, int, 0, MAX_SECONDS),
    "windowBuffer": (0, int, 0, MAX_SECONDS),
    "minPopWaitTime": (0, int, 0, MAX_POP_WAIT_MS),
    "retentionEnabled": (False, bool, 0, 0),
    "retentionSeconds": (0, int, 0, MAX_SECONDS),
    "completedRetentionSeconds": (0, int, 0, MAX_SECONDS),
    "maxWaitTimeSeconds": (0, int, 0, MAX_SECONDS),
    "encryptionEnabled": (False, bool, 0, 0),
    "dedupWindowSeconds": (3600, int, 0, MAX_SECONDS),
    "priority": (0, int, -INT_LIMIT, INT_LIMIT),
    # Queen stores ttl (default 3600) and never enforces it; here it is enforced, so it is off
    # (0) unless a configure sets it.
    "ttl": (0, int, 0, MAX_SECONDS),
    "maxSize": (0, int, 0, INT_LIMIT),
    "retryDelay": (1000, int, 0, MAX_SECONDS * 1000),
}

DEFAULTS: dict[str, Any] = {name: spec[0] for name, spec in _SPEC.items()}
# A queue created by the first push that names it gets a shorter lease, as in Queen.
PUSH_CREATED_DEFAULTS: dict[str, Any] = {**DEFAULTS, "leaseTime": 60}


def validate(options: Any) -> dict[str, Any]:
    """Check every given option; ``None`` values mean "back to the default" and are kept."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise BadRequest("options must be a JSON object")
    unknown = sorted(set(options) - set(_SPEC))
    if unknown:
        raise BadRequest(f"unknown queue option(s): {', '.join(unknown)}",
                         extra={"unknownOptions": unknown, "knownOptions": sorted(_SPEC)})
    clean: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            clean[name] = None
            continue
        _default, kind, low, high = _SPEC[name]
        if kind is bool:
            if not isinstance(value, bool):
                raise BadRequest(f"option {name} must be true or false")
            clean[name] = value
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"option {name} must be an integer")
        if not low <= value <= high:
            raise BadRequest(f"option {name} must be between {low} and {high}")
        clean[name] = value
    return clean


def merge(current: dict[str, Any] | None, changes: dict[str, Any], mode: str) -> dict[str, Any]:
    """merge: absent keys keep their value; replace: absent keys return to the default."""
    base = dict(DEFAULTS) if mode == "replace" or current is None else {**DEFAULTS, **current}
    for name, value in changes.items():
        base[name] = DEFAULTS[name] if value is None else value
    return base
