"""The roles of Queen's model, and which token roles satisfy what a route requires.

Every route of the route table (reginamq/http/routes.py) names one requirement. A token
carries one or more roles (claims ``role`` and ``roles``); it passes when any of them is
accepted by the route's requirement. The requirements are not a ladder: ``write-only`` is
for producers that may push and do nothing else, so it sits beside ``read-only``, not below
or above it, and ``read-write`` and ``admin`` include both.
"""

from __future__ import annotations

PUBLIC = "public"
READ_ONLY = "read-only"
WRITE_ONLY = "write-only"
READ_WRITE = "read-write"
ADMIN = "admin"

# What a route may require -> the token roles that satisfy it. PUBLIC needs no token at all.
ACCEPTED: dict[str, frozenset[str]] = {
    READ_ONLY: frozenset({READ_ONLY, READ_WRITE, ADMIN}),
    WRITE_ONLY: frozenset({WRITE_ONLY, READ_WRITE, ADMIN}),
    READ_WRITE: frozenset({READ_WRITE, ADMIN}),
    ADMIN: frozenset({ADMIN}),
}
TOKEN_ROLES = frozenset(ACCEPTED)
REQUIREMENTS = frozenset({PUBLIC, *ACCEPTED})


def permits(required: str, roles: frozenset[str]) -> bool:
    """Whether a token holding ``roles`` may call a route that requires ``required``."""
    return required == PUBLIC or not ACCEPTED[required].isdisjoint(roles)
