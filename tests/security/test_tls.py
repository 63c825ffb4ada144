"""HTTPS with ``--tls-cert/--tls-key``, together with RS256 tokens checked against a JWKS file.

The certificate is self-signed, made in the test; clients trust exactly that certificate.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.auth_helpers import AUDIENCE, ISSUER, mint, self_signed
from tests.conformance.helpers import open_client, pop_now
from tests.conftest import free_port, spool_dir, stop_process

SIGNING_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def tls_broker(database_url, tmp_path_factory):
    """(url, certificate path, log path) of a broker serving HTTPS with RS256 auth."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(folder)
    jwks = folder / "jwks.json"
    entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(SIGNING_KEY.public_key()))
    jwks.write_text(json.dumps({"keys": [{**entry, "kid": "k1", "alg": "RS256"}]}))
    port, log_path = free_port(), folder / "broker.log"
    env = {**os.environ, "REGINAMQ_DATABASE_URL": database_url, "REGINAMQ_SPOOL_DIR": spool_dir(),
           "REGINAMQ_AUTH_ISSUER": ISSUER, "REGINAMQ_AUTH_AUDIENCE": AUDIENCE}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "reginamq", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--tls-cert", str(cert), "--tls-key", str(key), "--auth", "jwt", "--auth-jwks", str(jwks)],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{url}/health", verify=trust(cert), timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the TLS broker did not become healthy"
                time.sleep(0.2)
        yield url, cert, log_path
    finally:
        stop_process(process)


def trust(cert) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def rs256(role: str, sub: str = "tls-tester") -> str:
    return mint(role, sub=sub, key=SIGNING_KEY, algorithm="RS256", headers={"kid": "k1"})


def test_serves_https_only_and_says_so(tls_broker):
    url, _cert, log_path = tls_broker
    assert f"listening on {url}" in log_path.read_text()
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://") + "/health", timeout=2)
    with pytest.raises(httpx.ConnectError):  # an untrusted certificate is refused by the client
        httpx.get(f"{url}/health", timeout=2)


def test_rs256_tokens_over_https(tls_broker):
    url, cert, _ = tls_broker
    with httpx.Client(base_url=url, verify=trust(cert)) as client:
        reader = {"Authorization": f"Bearer {rs256('read-only')}"}
        assert client.get("/api/v1/status", headers=reader).status_code == 200
        assert client.get("/api/v1/status").status_code == 401
        hmac_token = mint("admin", key="a-shared-secret-of-at-least-32-bytes")
        refused = client.get("/api/v1/status", headers={"Authorization": f"Bearer {hmac_token}"})
        assert refused.status_code == 401 and "not accepted" in refused.json()["error"]


async def test_the_official_client_over_https(tls_broker, queue):
    url, cert, _ = tls_broker
    async with open_client(url, bearer_token=rs256("read-write", sub="tls-producer"),
                           transport=httpx.AsyncHTTPTransport(verify=trust(cert))) as queen:
        assert (await queen.queue(queue).push({"data": {"secure": True}}))[0]["status"] == "queued"
        messages = await pop_now(queen, queue)
        assert [(m["data"], m["producerSub"]) for m in messages] == [({"secure": True}, "tls-producer")]
        assert (await queen.ack(messages, True))["success"] is True
