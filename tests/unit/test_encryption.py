"""Sealing message fragments: AES-256-GCM after the id, marked where no client can write."""

from __future__ import annotations

import os

import msgspec
import orjson
import pytest

from reginamq.config import Settings
from reginamq.engine import push
from reginamq.engine.encryption import ID_PREFIX, Sealer, SealingError, parse_key

KEY, OTHER = os.urandom(32), os.urandom(32)


def fragment(payload: bytes = b'{"card":"4111-1111"}') -> bytes:
    [item] = [push.PushItem(queue="q", payload=msgspec.Raw(payload), transactionId="tx-1")]
    return push.prepare([item]).fragments[0]


def test_sealed_fragment_keeps_the_id_hides_the_rest_and_opens_again():
    plain = fragment()
    sealed = Sealer(KEY).seal(plain)
    assert sealed[:ID_PREFIX] == plain[:ID_PREFIX]
    assert b"4111" not in sealed and b"tx-1" not in sealed
    assert Sealer(KEY).reveal(sealed) == plain
    assert orjson.loads(b"{" + Sealer(KEY).reveal(sealed) + b"}")["data"] == {"card": "4111-1111"}


def test_every_seal_uses_a_fresh_nonce():
    plain = fragment()
    assert Sealer(KEY).seal(plain) != Sealer(KEY).seal(plain)


def test_plaintext_passes_through_and_sealing_twice_is_sealing_once():
    plain = fragment()
    assert Sealer().reveal(plain) == plain
    sealed = Sealer(KEY).seal(plain)
    assert Sealer(KEY).seal(sealed) == sealed


def test_a_payload_cannot_pass_for_a_sealed_fragment():
    # byte 43 of a plaintext fragment is always the comma before transactionId
    assert fragment(b'"\\u0000\\u0000"')[ID_PREFIX:ID_PREFIX + 1] == b","


def test_old_keys_open_what_they_sealed_after_a_rotation():
    plain = fragment()
    sealed_before = Sealer(KEY).seal(plain)
    rotated = Sealer(OTHER, (KEY,))
    assert rotated.reveal(sealed_before) == plain
    sealed_after = rotated.seal(plain)
    assert rotated.reveal(sealed_after) == plain
    with pytest.raises(SealingError, match="key this broker does not have"):
        Sealer(KEY).reveal(sealed_after)


def test_an_altered_fragment_is_refused():
    sealed = bytearray(Sealer(KEY).seal(fragment()))
    sealed[-1] ^= 1
    with pytest.raises(SealingError, match="integrity"):
        Sealer(KEY).reveal(bytes(sealed))


def test_no_key_no_sealing_and_no_opening():
    with pytest.raises(SealingError) as refused:
        Sealer().seal(fragment())
    assert refused.value.status == 503
    with pytest.raises(SealingError):
        Sealer().reveal(Sealer(KEY).seal(fragment()))


@pytest.mark.parametrize("text", ["", "abc", "zz" * 32, "00" * 31, "00" * 33])
def test_a_malformed_key_is_refused_without_echoing_it(text):
    with pytest.raises(ValueError, match="64 hex characters") as refused:
        parse_key(text, "REGINAMQ_ENCRYPTION_KEY")
    assert not text or text not in str(refused.value)


def test_keys_come_from_settings_and_never_show_in_their_repr():
    settings = Settings.from_env({"REGINAMQ_ENCRYPTION_KEY": KEY.hex(), "REGINAMQ_ENCRYPTION_OLD_KEYS": OTHER.hex()})
    sealer = Sealer.from_settings(settings)
    plain = fragment()
    assert sealer.has_key and sealer.reveal(Sealer(OTHER).seal(plain)) == plain
    assert Sealer(KEY).reveal(sealer.seal(plain)) == plain
    assert KEY.hex() not in repr(settings) and OTHER.hex() not in repr(settings)
    assert Sealer.from_settings(Settings.from_env({"QUEEN_ENCRYPTION_KEY": KEY.hex()})).has_key
    assert not Sealer.from_settings(Settings.from_env({})).has_key
