"""Bearer tokens (JWT): loading the verification keys, and checking a token against them.

Keys come from local files or the environment only, never from the network: a broker that
fetched a JWKS URL could be pointed at an attacker's keys, and would stop admitting anyone
while the identity provider is down. Each key accepts only the algorithms of its own kind
(an HMAC secret HS*, an RSA key RS*/PS*, an EC key the ES* of its curve, an Ed25519/Ed448
key EdDSA), so a token can never choose how it is checked (no "alg: none", no HMAC keyed
with a public key).

A verified token is remembered until it expires, so a client that sends the same token on
every request pays for the signature check once, not per request: a signature check (an RSA
one above all) is costly next to the request it admits.

Messages of :class:`TokenRejected` and :class:`AuthConfigError` are fixed texts that may be
shown to anyone: they never quote the token, the secret or a key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from reginamq.config import Settings
from reginamq.security.roles import TOKEN_ROLES

HMAC_ALGORITHMS = {"HS256": 32, "HS384": 48, "HS512": 64}  # algorithm -> least secret bytes (RFC 7518 3.2)
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512", "secp256k1": "ES256K"}
MIN_RSA_BITS = 2048
CACHE_SIZE = 1024


class AuthConfigError(ValueError):
    """The broker's auth settings cannot work; it refuses to start rather than serve unprotected."""


class TokenRejected(Exception):
    """The token does not prove anything: the request is answered 401."""


@dataclasses.dataclass(frozen=True)
class Identity:
    subject: str | None
    roles: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Key:
    kid: str | None
    material: Any  # secret bytes, or a cryptography public key
    algorithms: frozenset[str]


class Verifier:
    def __init__(self, keys: list[Key], issuer: str | None = None, audience: str | None = None,
                 leeway: float = 30.0, cache_size: int = CACHE_SIZE):
        if not keys:
            raise AuthConfigError("no verification key")
        if len(keys) > 1 and any(key.kid is None for key in keys):
            raise AuthConfigError("a key set of several keys needs a key id (kid) on every key")
        self.keys = keys
        self.issuer, self.audience, self.leeway = issuer, audience, leeway
        self._options = {"verify_aud": audience is not None, "enforce_minimum_key_length": True}
        self._cache: OrderedDict[str, tuple[Identity, float]] = OrderedDict()
        self._cache_size = cache_size

    def verify(self, token: str) -> Identity:
        """The identity the token proves, or :class:`TokenRejected` saying why it proves nothing."""
        cached = self._cache.get(token)
        if cached is not None:
            if time.time() < cached[1]:
                self._cache.move_to_end(token)
                return cached[0]
            del self._cache[token]
        claims = self._decode(token)
        identity = Identity(claims.get("sub"), _roles(claims))
        expires = claims.get("exp")
        self._cache[token] = (identity, math.inf if expires is None else expires + self.leeway)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return identity

    def _decode(self, token: str) -> dict:
        try:
            header = jwt.get_unverified_header(token)
            key = self._key_for(header)
            return jwt.decode(token, key.material, algorithms=[header.get("alg")], issuer=self.issuer,
                              audience=self.audience, leeway=self.leeway, options=self._options)
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except (jwt.ImmatureSignatureError, jwt.InvalidIssuedAtError):
            raise TokenRejected("the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected("the token is not meant for this broker (audience)") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("the token comes from an issuer this broker does not trust") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenRejected(f"the token lacks the {error.claim!r} claim") from None
        except jwt.exceptions.InvalidSubjectError:
            raise TokenRejected("the token's 'sub' claim must be a string") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except jwt.PyJWTError:
            raise TokenRejected("the token is malformed") from None

    def _key_for(self, header: dict) -> Key:
        kid, algorithm = header.get("kid"), header.get("alg")
        keys = self.keys if kid is None else [key for key in self.keys if key.kid in (kid, None)]
        if len(keys) != 1:
            raise TokenRejected("the token names no key (kid) of this broker's key set" if kid is None or not keys
                                else "the token's key id (kid) is ambiguous")
        if algorithm not in keys[0].algorithms:
            raise TokenRejected(f"tokens signed with {str(algorithm)[:20]!r} are not accepted "
                                f"(accepted: {', '.join(sorted(keys[0].algorithms))})")
        return keys[0]


def _roles(claims: dict) -> frozenset[str]:
    """Queen's claims: ``role`` (one name) and ``roles`` (a list); names outside the model are ignored."""
    named: list = []
    for claim in (claims.get("role"), claims.get("roles")):
        if isinstance(claim, str):
            named.append(claim)
        elif isinstance(claim, list):
            named.extend(claim)
    return frozenset(name for name in named if isinstance(name, str) and name in TOKEN_ROLES)


# -- keys ----------------------------------------------------------------------------------------


def secret_key(secret: bytes, kid: str | None = None) -> Key:
    """An HMAC secret accepts each HS algorithm its length is enough for (at least 32 bytes: HS256)."""
    algorithms = frozenset(name for name, least in HMAC_ALGORITHMS.items() if len(secret) >= least)
    if not algorithms:
        raise AuthConfigError(f"the JWT secret is {len(secret)} bytes long; HS256 needs at least 32 "
                              "(RFC 7518 section 3.2)")
    return Key(kid, secret, algorithms)


def public_key(material: Any, kid: str | None = None) -> Key:
    """A public key accepts the algorithms of its own kind only."""
    if isinstance(material, rsa.RSAPublicKey):
        if material.key_size < MIN_RSA_BITS:
            raise AuthConfigError(f"an RSA key of {material.key_size} bits is too small (at least {MIN_RSA_BITS})")
        return Key(kid, material, RSA_ALGORITHMS)
    if isinstance(material, ec.EllipticCurvePublicKey) and material.curve.name in EC_ALGORITHMS:
        return Key(kid, material, frozenset({EC_ALGORITHMS[material.curve.name]}))
    if isinstance(material, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return Key(kid, material, frozenset({"EdDSA"}))
    raise AuthConfigError(f"unsupported public key type {type(material).__name__}")


def pem_key(path: Path) -> Key:
    try:
        material = load_pem_public_key(_read(path, "public key"))
    except ValueError:
        raise AuthConfigError(f"{path} is not a PEM public key (BEGIN PUBLIC KEY)") from None
    return public_key(material)


def jwks_keys(path: Path) -> list[Key]:
    """Every key of a JWKS file: RSA, EC, OKP (Ed25519/Ed448) and oct (an HMAC secret)."""
    try:
        entries = json.loads(_read(path, "JWKS"))["keys"]
        jwks = [(entry.get("alg"), jwt.PyJWK(entry)) for entry in entries]
    except (jwt.PyJWTError, ValueError, KeyError, TypeError, AttributeError):
        raise AuthConfigError(f"{path} is not a usable JWKS document ({{\"keys\": [...]}})") from None
    keys = []
    for declared, jwk in jwks:
        key = secret_key(jwk.key, jwk.key_id) if isinstance(jwk.key, bytes) else public_key(jwk.key, jwk.key_id)
        if declared is not None:
            if declared not in key.algorithms:
                raise AuthConfigError(f"{path}: key {jwk.key_id!r} declares alg {str(declared)[:20]!r}, "
                                      "which its key type or length does not allow")
            key = dataclasses.replace(key, algorithms=frozenset({declared}))
        keys.append(key)
    return keys


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise AuthConfigError(f"cannot read the {what} file {path}: {error.strerror}") from None


def verifier_from(settings: Settings) -> Verifier | None:
    """The broker's verifier, or None when access control is off (the default)."""
    if settings.auth == "none":
        return None
    if settings.auth != "jwt":
        raise AuthConfigError(f"unknown auth mode {settings.auth!r} (none or jwt)")
    sources = [settings.auth_secret, settings.auth_secret_file, settings.auth_public_key, settings.auth_jwks]
    if sum(source is not None for source in sources) != 1:
        raise AuthConfigError("--auth jwt needs exactly one key source: a secret (REGINAMQ_AUTH_SECRET or "
                              "--auth-secret-file), --auth-public-key or --auth-jwks")
    if settings.auth_secret is not None:
        keys = [secret_key(settings.auth_secret.encode())]
    elif settings.auth_secret_file is not None:
        keys = [secret_key(_read(settings.auth_secret_file, "secret").rstrip(b"\r\n"))]
    elif settings.auth_public_key is not None:
        keys = [pem_key(settings.auth_public_key)]
    else:
        keys = jwks_keys(settings.auth_jwks)
    if not 0 <= settings.auth_leeway <= 3600:
        raise AuthConfigError("the clock-skew leeway must be between 0 and 3600 seconds")
    return Verifier(keys, settings.auth_issuer, settings.auth_audience, settings.auth_leeway)
