"""Token verification with real keys: every supported key kind, every way a token is refused."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from reginamq.config import Settings
from reginamq.security.tokens import (
    AuthConfigError,
    TokenRejected,
    Verifier,
    jwks_keys,
    pem_key,
    secret_key,
    verifier_from,
)
from tests.auth_helpers import AUDIENCE, ISSUER, SECRET, mint
from tests.conftest import wait_until

LONG_SECRET = "s" * 64


def pem_file(tmp_path, private_key, name="key.pem"):
    path = tmp_path / name
    path.write_bytes(private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                           serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def verifier(*keys, **kwargs) -> Verifier:
    return Verifier(list(keys), **{"issuer": ISSUER, "audience": AUDIENCE, **kwargs})


def rejected(check: Verifier, token: str) -> str:
    with pytest.raises(TokenRejected) as refusal:
        check.verify(token)
    return str(refusal.value)


def test_hmac_secret_accepts_the_hs_algorithms_its_length_allows():
    check = verifier(secret_key(LONG_SECRET.encode()))
    for algorithm in ("HS256", "HS384", "HS512"):
        assert check.verify(mint("admin", key=LONG_SECRET, algorithm=algorithm, sub=algorithm)).subject == algorithm
    medium = "m" * 48  # enough for HS384, too short for HS512
    check = verifier(secret_key(medium.encode()))
    assert check.verify(mint("admin", key=medium, algorithm="HS384")).roles == {"admin"}
    with pytest.warns(jwt.warnings.InsecureKeyLengthWarning):
        too_weak = mint("admin", key=medium, algorithm="HS512")
    assert "not accepted" in rejected(check, too_weak)


def test_a_short_secret_refuses_to_start_without_showing_it():
    with pytest.raises(AuthConfigError) as refusal:
        secret_key(b"too-short-secret")
    assert "16 bytes" in str(refusal.value) and "too-short-secret" not in str(refusal.value)


@pytest.mark.parametrize("private_key, algorithms", [
    (rsa.generate_private_key(public_exponent=65537, key_size=2048), ("RS256", "RS512", "PS256")),
    (ec.generate_private_key(ec.SECP256R1()), ("ES256",)),
    (ec.generate_private_key(ec.SECP384R1()), ("ES384",)),
    (ed25519.Ed25519PrivateKey.generate(), ("EdDSA",)),
], ids=["rsa", "p256", "p384", "ed25519"])
def test_pem_public_keys_verify_their_own_algorithms(tmp_path, private_key, algorithms):
    check = verifier(pem_key(pem_file(tmp_path, private_key)))
    for algorithm in algorithms:
        assert check.verify(mint("read-only", key=private_key, algorithm=algorithm, sub=algorithm)).subject == algorithm
    # The same claims signed with a secret are refused: the key decides the algorithm, not the token.
    assert "not accepted" in rejected(check, mint("read-only", key=LONG_SECRET, algorithm="HS256"))


def test_hmac_keyed_with_the_public_key_is_refused(tmp_path):
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = pem_file(tmp_path, private_key)
    forged = jwt.api_jws.PyJWS()
    forged._algorithms["HS256"].prepare_key = lambda key: key  # a signer that allows PEM bytes as an HMAC key
    payload = json.dumps({"sub": "mallory", "role": "admin", "iss": ISSUER, "aud": AUDIENCE}).encode()
    token = forged.encode(payload, path.read_bytes(), algorithm="HS256")
    assert "not accepted" in rejected(verifier(pem_key(path)), token)


def test_unsigned_and_tampered_tokens_are_refused():
    check = verifier(secret_key(SECRET.encode()))
    unsigned = jwt.encode({"sub": "mallory", "role": "admin", "iss": ISSUER, "aud": AUDIENCE}, None,
                          algorithm="none")
    assert "not accepted" in rejected(check, unsigned)
    header, _payload, signature = mint("read-only").split(".")
    other = mint("admin").split(".")[1]
    assert rejected(check, f"{header}.{other}.{signature}") == "the token's signature does not verify"
    assert rejected(check, "not-a-jwt") == "the token is malformed"
    assert rejected(check, mint("admin", key="x" * 32)) == "the token's signature does not verify"


def test_time_claims_honour_the_leeway():
    check = verifier(secret_key(SECRET.encode()), leeway=30)
    assert check.verify(mint("admin", lifetime=-10)).roles == {"admin"}  # expired 10 s ago, within 30 s
    assert rejected(check, mint("admin", lifetime=-60)) == "the token has expired"
    assert rejected(check, mint("admin", nbf=int(time.time()) + 120)) == "the token is not valid yet"
    strict = verifier(secret_key(SECRET.encode()), leeway=0)
    assert rejected(strict, mint("admin", lifetime=-10)) == "the token has expired"


def test_issuer_and_audience_are_required_when_configured():
    check = verifier(secret_key(SECRET.encode()))
    assert "issuer" in rejected(check, mint("admin", iss="https://elsewhere.test"))
    assert "audience" in rejected(check, mint("admin", aud="another-service"))
    assert rejected(check, mint("admin", iss=None)) == "the token lacks the 'iss' claim"
    assert rejected(check, mint("admin", aud=None)) == "the token lacks the 'aud' claim"
    # Without a configured audience, a token's own 'aud' does not matter.
    assert Verifier([secret_key(SECRET.encode())]).verify(mint("admin", aud="anything")).roles == {"admin"}


def test_roles_come_from_role_and_roles_and_unknown_names_are_ignored():
    check = verifier(secret_key(SECRET.encode()))
    assert check.verify(mint("read-only", roles=["write-only", "superuser", 7])).roles == {"read-only", "write-only"}
    assert check.verify(mint(None, roles="admin")).roles == {"admin"}
    assert check.verify(mint("root")).roles == frozenset()
    assert check.verify(mint(None, sub=None)).subject is None


def test_jwks_selects_the_key_by_kid_for_rotation(tmp_path):
    old, new = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    shared = "k" * 48
    entries = [{**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "alg": "RS256"}
               for kid, key in (("2025", old), ("2026", new))]
    entries.append({"kty": "oct", "kid": "hmac", "k": jwt.utils.base64url_encode(shared.encode()).decode()})
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": entries}))
    check = verifier(*jwks_keys(path))
    for kid, key in (("2025", old), ("2026", new)):
        token = mint("admin", key=key, algorithm="RS256", headers={"kid": kid}, sub=kid)
        assert check.verify(token).subject == kid
    assert check.verify(mint("admin", key=shared, algorithm="HS384", headers={"kid": "hmac"})).roles == {"admin"}
    # A token signed by the old key but naming the new one, a retired key, or no key at all.
    assert rejected(check, mint("admin", key=old, algorithm="RS256", headers={"kid": "2026"})) \
        == "the token's signature does not verify"
    assert "names no key" in rejected(check, mint("admin", key=old, algorithm="RS256", headers={"kid": "2024"}))
    assert "names no key" in rejected(check, mint("admin", key=old, algorithm="RS256"))
    assert "not accepted" in rejected(check, mint("admin", key=new, algorithm="RS512", headers={"kid": "2026"}))


def test_jwks_refuses_keys_that_cannot_work(tmp_path):
    path = tmp_path / "jwks.json"
    short = jwt.utils.base64url_encode(b"k" * 32).decode()
    path.write_text(json.dumps({"keys": [{"kty": "oct", "kid": "a", "alg": "HS512", "k": short}]}))
    with pytest.raises(AuthConfigError, match="declares alg"):
        jwks_keys(path)
    key = ec.generate_private_key(ec.SECP256R1())
    entry = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())), "kid": "a", "alg": "RS256"}
    for document in ({"keys": [entry]}, {"keys": 1}, [], {"keys": [{"kty": "unknown"}]}):
        path.write_text(json.dumps(document))
        with pytest.raises(AuthConfigError, match="not a usable JWKS"):
            jwks_keys(path)
    private = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key))
    path.write_text(json.dumps({"keys": [private]}))
    with pytest.raises(AuthConfigError, match="unsupported public key"):
        jwks_keys(path)


def test_a_verified_token_is_not_verified_again_until_it_expires():
    check = verifier(secret_key(SECRET.encode()), leeway=0)
    token = mint("read-write", sub="cached")
    assert check.verify(token).subject == "cached"
    check.keys = [secret_key(b"a-different-secret-of-enough-length!")]  # a fresh check would now fail
    assert check.verify(token).subject == "cached"
    assert "signature" in rejected(check, mint("read-write", sub="new"))
    short = verifier(secret_key(SECRET.encode()), leeway=0)
    brief = mint("admin", lifetime=1)
    assert short.verify(brief).roles == {"admin"}

    def refused_once_expired() -> bool:
        try:
            short.verify(brief)
        except TokenRejected as refusal:
            assert str(refusal) == "the token has expired"
            return True
        return False

    assert wait_until(refused_once_expired, seconds=5)


def test_the_cache_is_bounded():
    check = verifier(secret_key(SECRET.encode()), cache_size=2)
    for n in range(3):
        check.verify(mint("admin", sub=str(n)))
    assert len(check._cache) == 2


def test_settings_choose_exactly_one_key_source_and_hide_the_secret(tmp_path):
    assert verifier_from(Settings.from_env({})) is None
    on = Settings.from_env({"REGINAMQ_AUTH": "jwt", "REGINAMQ_AUTH_SECRET": SECRET})
    assert verifier_from(on) is not None
    assert SECRET not in repr(on) and "auth_secret='<hidden>'" in repr(on)
    with pytest.raises(AuthConfigError, match="exactly one key source"):
        verifier_from(Settings.from_env({"REGINAMQ_AUTH": "jwt"}))
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    with pytest.raises(AuthConfigError, match="exactly one key source"):
        verifier_from(Settings(auth="jwt", auth_secret=SECRET, auth_secret_file=secret_file))
    from_file = verifier_from(Settings(auth="jwt", auth_secret_file=secret_file))
    assert from_file.verify(mint("admin", sub="file")).subject == "file"
    with pytest.raises(AuthConfigError, match="not a PEM public key"):
        verifier_from(Settings(auth="jwt", auth_public_key=secret_file))


def test_queen_environment_names_carry_over():
    settings = Settings.from_env({"JWT_ENABLED": "true", "JWT_SECRET": SECRET, "JWT_ISSUER": ISSUER,
                                  "JWT_AUDIENCE": AUDIENCE, "JWT_CLOCK_SKEW": "5"})
    assert (settings.auth, settings.auth_issuer, settings.auth_audience, settings.auth_leeway) == \
        ("jwt", ISSUER, AUDIENCE, 5.0)
    assert verifier_from(settings).verify(mint("admin", sub="queen")).subject == "queen"
    assert Settings.from_env(settings.to_env()) == settings


def test_a_database_password_is_hidden_too():
    settings = Settings(database_url="postgresql://broker:pa55word@db:5432/mq")
    assert "pa55word" not in repr(settings) and "postgresql://broker:<hidden>@db:5432/mq" in repr(settings)
