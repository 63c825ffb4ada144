"""Access control over HTTP against a real broker started with ``--auth jwt`` (the ``auth_broker`` fixture).

The route walk imports the route table itself, so a route added later is checked with every
role the day it is added: each role reaches exactly its routes (a write-only token pushes and
nothing else). What the official client makes of the same answers is in test_client_tokens.py;
docs/security.md's copy of the table is checked in tests/docs/test_security_md.py.
"""

from __future__ import annotations

import re
import uuid

import httpx
import jwt
import pytest
from click.testing import CliRunner

from reginamq.cli import main
from reginamq.http.routes import ROUTES
from reginamq.security.roles import PUBLIC, permits
from tests.auth_helpers import ROLES, SECRET, bearer, mint

UUID_PARAMS = {"partitionId", "leaseId", "id"}


@pytest.fixture
async def authed(auth_broker):
    async with httpx.AsyncClient(base_url=auth_broker[0], timeout=30) as client:
        yield client


def concrete(pattern: str, name: str) -> str:
    """A path matching the pattern: UUIDs where the route wants one, a fresh name elsewhere."""
    def value(match: re.Match) -> str:
        return str(uuid.uuid4()) if match.group(1) in UUID_PARAMS else f"{name}-{match.group(1)}"
    return re.sub(r"\{(\w+)\*?\}", value, pattern)


def assert_refused(response: httpx.Response, status: int, error: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert isinstance(response.json()["error"], str) and response.json()["error"]
    if error is not None:
        assert response.headers["www-authenticate"].endswith(f'error="{error}"')


async def test_every_route_admits_exactly_the_roles_it_declares(authed):
    tokens = {role: mint(role, sub=f"walker-{role}") for role in ROLES}
    name = f"walk-{uuid.uuid4().hex[:8]}"
    for route in ROUTES:
        path = concrete(route.pattern, name)
        body = b"{}" if route.method in ("POST", "DELETE") else None
        headers = {"content-type": "application/json"} if body else {}
        anonymous = await authed.request(route.method, path, content=body, headers=headers)
        label = f"{route.method} {route.pattern} without a token"
        if route.role == PUBLIC:
            assert anonymous.status_code not in (401, 403), label
        else:
            assert_refused(anonymous, 401)
        assert anonymous.status_code < 500, label
        for role, token in tokens.items():
            answer = await authed.request(route.method, path, content=body, headers={**headers, **bearer(token)})
            label = f"{route.method} {route.pattern} with a {role} token: {answer.status_code} {answer.text[:200]}"
            assert answer.status_code < 500, label
            if permits(route.role, frozenset({role})):
                assert answer.status_code not in (401, 403), label
            else:
                assert_refused(answer, 403, "insufficient_scope")
                assert route.role in answer.json()["error"], label


async def test_tokens_that_prove_nothing_are_401(authed):
    cases = {
        "the token has expired": mint("admin", lifetime=-3600),
        "the token's signature does not verify": mint("admin", key="an-attacker-secret-of-32-bytes!!"),
        "the token comes from an issuer this broker does not trust": mint("admin", iss="https://elsewhere.test"),
        "the token is not meant for this broker (audience)": mint("admin", aud="another-service"),
        "the token is malformed": "not.a.token",
    }
    for error, token in cases.items():
        answer = await authed.get("/api/v1/status", headers=bearer(token))
        assert_refused(answer, 401, "invalid_token")
        assert answer.json()["error"] == error
        assert token not in answer.text
    unsigned = jwt.encode({"sub": "mallory", "role": "admin"}, None, algorithm="none")
    assert_refused(await authed.get("/api/v1/status", headers=bearer(unsigned)), 401, "invalid_token")
    assert_refused(await authed.get("/api/v1/status", headers={"Authorization": "Basic dXNlcjpwYXNz"}), 401)
    missing = await authed.get("/api/v1/status")
    assert_refused(missing, 401)
    assert missing.json()["error"].startswith("authentication required")


async def test_a_bare_token_is_accepted_like_queen_does(authed):
    assert (await authed.get("/api/v1/status", headers={"Authorization": mint("read-only")})).status_code == 200


async def test_status_needs_a_read_only_token_as_on_queen(authed):
    assert_refused(await authed.get("/status"), 401)
    assert_refused(await authed.get("/status", headers=bearer(mint("write-only"))), 403, "insufficient_scope")
    answer = await authed.get("/status", headers=bearer(mint("read-only")))
    assert answer.status_code == 200 and answer.json() == {"status": "ok", "engine": "reginamq"}


async def test_a_valid_token_without_a_known_role_is_403(authed):
    answer = await authed.get("/api/v1/status", headers=bearer(mint("superuser")))
    assert_refused(answer, 403, "insufficient_scope")
    assert "the token's roles: none" in answer.json()["error"]


async def test_a_refused_large_push_gets_its_401(authed, queue):
    items = [{"queue": queue, "payload": {"filler": "x" * 1000}} for _ in range(2000)]  # ~2 MB
    answer = await authed.post("/api/v1/push", json={"items": items})
    assert_refused(answer, 401)
    assert (await authed.get("/health")).status_code == 200  # and the connection is still usable


async def test_producer_sub_is_the_tokens_and_cannot_be_impersonated(authed, queue):
    items = [{"queue": queue, "partition": "p", "payload": {"n": n}, "producerSub": "mallory"} for n in range(2)]
    assert (await authed.post("/api/v1/push", json={"items": items},
                              headers=bearer(mint("write-only", sub="alice")))).status_code == 201
    transaction = {"operations": [{"type": "push", "items": [{"queue": queue, "partition": "p", "payload": {"n": 2},
                                                              "producerSub": "mallory"}]}]}
    committed = await authed.post("/api/v1/transaction", json=transaction,
                                  headers=bearer(mint("read-write", sub="bob")))
    assert committed.status_code == 200 and committed.json()["success"], committed.text
    popped = await authed.get(f"/api/v1/pop/queue/{queue}/partition/p?batch=10",
                              headers=bearer(mint("read-write", sub="consumer")))
    assert popped.status_code == 200
    stamped = {message["data"]["n"]: message["producerSub"] for message in popped.json()["messages"]}
    assert stamped == {0: "alice", 1: "alice", 2: "bob"}


async def test_auth_off_ignores_tokens_and_stamps_no_producer(http, queue):
    token = bearer(mint("read-only", sub="alice"))
    pushed = await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": 1, "producerSub": "x"}]},
                             headers=token)
    assert pushed.status_code == 201
    popped = await http.get(f"/api/v1/pop/queue/{queue}", headers=token)
    assert popped.json()["messages"][0]["producerSub"] is None


async def test_the_secret_never_shows(authed, auth_broker):
    admin = bearer(mint("admin"))
    answers = [await authed.get(path, headers=admin) for path in
               ("/api/v1/status", "/metrics", "/metrics/prometheus", "/openapi.json", "/health")]
    answers.append(await authed.get("/api/v1/status", headers=bearer(mint("admin", key=SECRET[::-1]))))
    answers.append(await authed.get("/api/v1/status", headers=bearer(SECRET)))
    for answer in answers:
        assert answer.status_code in (200, 401), answer.text
        assert SECRET not in answer.text
    log = auth_broker[1].read_text(errors="replace")
    assert log and SECRET not in log


def test_serve_refuses_auth_settings_that_cannot_work(tmp_path):
    cases = [
        (["--auth", "jwt"], {}, "exactly one key source"),
        (["--auth", "jwt"], {"REGINAMQ_AUTH_SECRET": "tiny-secret-value"}, "17 bytes long"),
        (["--tls-cert", __file__], {}, "--tls-cert and --tls-key go together"),
    ]
    for args, env, message in cases:
        result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path), *args],
                                    env={"REGINAMQ_AUTH": None, "REGINAMQ_AUTH_SECRET": None, **env})
        assert result.exit_code == 2 and message in result.output, result.output
        assert "tiny-secret-value" not in result.output
