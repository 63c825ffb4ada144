"""Access control at the HTTP edge: the Authorization header against the route's role.

Only built when the broker runs with ``--auth jwt``; with auth off the app never calls it, so
the hot path pays one attribute check. Answers follow RFC 6750 and the broker's error shape:
401 ``{"error": ...}`` with ``WWW-Authenticate: Bearer`` when there is no usable token (none,
malformed, bad signature, expired, wrong issuer or audience), 403 when a valid token's roles do
not reach the route. Neither answer quotes the token. The bodies carry a ``code``
("unauthorized", "forbidden"), which the official client exposes as ``error.code``.
"""

from __future__ import annotations

import orjson

from reginamq.http import responses
from reginamq.security.roles import PUBLIC, permits
from reginamq.security.tokens import TokenRejected, Verifier

REALM = 'Bearer realm="reginamq"'


class Refused(Exception):
    def __init__(self, answer: responses.Response):
        super().__init__(answer[0])
        self.answer = answer


class Guard:
    def __init__(self, verifier: Verifier):
        self.verifier = verifier

    def admit(self, required: str, authorization: str | None) -> str | None:
        """The caller's subject (``sub``) when the route admits it, else :class:`Refused`."""
        if required == PUBLIC:
            return None
        if not authorization:
            raise Refused(_refusal(401, "authentication required: send Authorization: Bearer <token>", REALM))
        token = _bearer(authorization)
        if token is None:
            raise Refused(_refusal(401, "the Authorization header must be 'Bearer <token>'", REALM))
        try:
            identity = self.verifier.verify(token)
        except TokenRejected as rejected:
            raise Refused(_refusal(401, str(rejected), f'{REALM}, error="invalid_token"')) from None
        if not permits(required, identity.roles):
            held = ", ".join(sorted(identity.roles)) or "none"
            raise Refused(_refusal(403, f"insufficient permissions: this route needs the {required} role "
                                        f"(or one that includes it); the token's roles: {held}",
                                   f'{REALM}, error="insufficient_scope"'))
        return identity.subject


def _bearer(authorization: str) -> str | None:
    """The token of ``Bearer <token>`` (scheme case-insensitive); like Queen, a bare token is taken as is."""
    scheme, _, token = authorization.strip().partition(" ")
    if not token:
        return scheme or None
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _refusal(status: int, message: str, challenge: str) -> responses.Response:
    body = {"error": message, "code": "unauthorized" if status == 401 else "forbidden"}
    return status, orjson.dumps(body), responses.JSON, [("www-authenticate", challenge)]
