"""Payload encryption at rest for queues with ``encryptionEnabled`` (AES-256-GCM).

What is sealed is the part of a stored message fragment after its id: transactionId, traceId,
payload and producerSub. A fragment always starts with the 43 bytes ``"id":"<uuid>"``, which
the SQL of message copies and tombstones relies on, and a plaintext fragment always goes on
with a comma. A sealed one goes on with a zero byte instead, then the key's fingerprint (so
old keys keep opening what they sealed after a rotation), the nonce, and the ciphertext with
its tag. The mark sits in a position no client controls, so a payload can never pass for a
sealed one, and every reader (pop, browse, DLQ) opens fragments the same way, whatever the
queue's flag says today.

Writing plaintext into an encrypted queue is impossible by construction: rq_push refuses an
unsealed fragment for a queue with the flag (002_push.sql), whatever this process's cache of
encrypted queues believed.
"""

from __future__ import annotations

import hashlib
import os
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from reginamq.common.errors import Refused
from reginamq.store import Store

ID_PREFIX = 43  # len('"id":"') + 36 + len('"')
SEALED_MARK = 0
NONCE_BYTES = 12
FINGERPRINT_BYTES = 4


class SealingError(Refused):
    """The broker cannot seal or open a message with the keys it has (a deployment problem,
    not the client's): answered 503 so a load balancer may try a node that has the key."""

    def __init__(self, message: str):
        super().__init__(message, status=503, extra={"code": "encryption_unavailable"})


def parse_key(text: str, setting: str) -> bytes:
    """A key is 64 hex characters (32 bytes); anything else stops the broker at start."""
    text = text.strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError(f"{setting} must be 64 hex characters (a 256-bit key)")
    return key


def _fingerprint(key: bytes) -> bytes:
    return hashlib.sha256(b"reginamq-key-id" + key).digest()[:FINGERPRINT_BYTES]


class Sealer:
    """Seals with the current key, opens with the current or any older key, and knows which
    queues are encrypted (re-read every few seconds, and at once when rq_push disagrees)."""

    REFRESH_SECONDS = 2.0

    def __init__(self, key: bytes | None = None, old_keys: tuple[bytes, ...] = ()):
        self._current = None if key is None else (_fingerprint(key), AESGCM(key))
        self._openers = {_fingerprint(k): AESGCM(k) for k in (*old_keys, *([key] if key else []))}
        self._encrypted: frozenset[str] = frozenset()
        self._read_at = -self.REFRESH_SECONDS

    @classmethod
    def from_settings(cls, settings) -> Sealer:
        key = None if not settings.encryption_key else parse_key(settings.encryption_key, "REGINAMQ_ENCRYPTION_KEY")
        old = tuple(parse_key(text, "each of REGINAMQ_ENCRYPTION_OLD_KEYS")
                    for text in (settings.encryption_old_keys or "").split(",") if text.strip())
        return cls(key, old)

    @property
    def has_key(self) -> bool:
        return self._current is not None

    async def encrypted_queues(self, store: Store, *, fresh: bool = False) -> frozenset[str]:
        if fresh or time.monotonic() - self._read_at >= self.REFRESH_SECONDS:
            self._encrypted = await store.queue_settings.encrypted()
            self._read_at = time.monotonic()
        return self._encrypted

    def forget(self) -> None:
        """The next look at the encrypted queues reads them from the database."""
        self._read_at = -self.REFRESH_SECONDS

    def known_encrypted(self) -> frozenset[str]:
        """What the last look found, without a database (for the spool, while it is away)."""
        return self._encrypted

    def seal(self, fragment: bytes) -> bytes:
        if len(fragment) > ID_PREFIX and fragment[ID_PREFIX] == SEALED_MARK:
            return fragment  # already sealed (a replay, or a retry after a refusal)
        if self._current is None:
            raise SealingError("this queue is encrypted and this broker has no encryption key "
                               "(set REGINAMQ_ENCRYPTION_KEY): nothing was written")
        fingerprint, cipher = self._current
        nonce = os.urandom(NONCE_BYTES)
        return (fragment[:ID_PREFIX] + bytes([SEALED_MARK]) + fingerprint + nonce
                + cipher.encrypt(nonce, fragment[ID_PREFIX:], None))

    def reveal(self, fragment: bytes) -> bytes:
        """The plaintext fragment (a plaintext one comes back as it is)."""
        if len(fragment) <= ID_PREFIX or fragment[ID_PREFIX] != SEALED_MARK:
            return fragment
        start = ID_PREFIX + 1
        fingerprint = fragment[start:start + FINGERPRINT_BYTES]
        nonce = fragment[start + FINGERPRINT_BYTES:start + FINGERPRINT_BYTES + NONCE_BYTES]
        cipher = self._openers.get(fingerprint)
        message_id = fragment[6:ID_PREFIX - 1].decode()
        if cipher is None:
            raise SealingError(f"message {message_id} is encrypted with a key this broker does not have "
                               "(add it to REGINAMQ_ENCRYPTION_OLD_KEYS)")
        try:
            body = cipher.decrypt(nonce, fragment[start + FINGERPRINT_BYTES + NONCE_BYTES:], None)
        except InvalidTag:
            raise SealingError(f"message {message_id} failed its integrity check: it was altered at rest") from None
        return fragment[:ID_PREFIX] + body
