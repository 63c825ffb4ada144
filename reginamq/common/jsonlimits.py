"""Strict JSON: the limits msgspec does not enforce on a request body, checked cheaply.

msgspec decodes the body into the request's shape but hands payloads over as raw bytes and
keeps the last of duplicate keys; on its own it would accept (and store) a payload with
invalid UTF-8, a key given twice, a number no double can hold, or nesting thousands of levels
deep that some consumers cannot decode. :func:`check` refuses all of them with a 400, for
the whole body (the structures the broker reads and the payloads it stores alike):

- UTF-8: ``bytes.isascii`` (or one ``decode``) over the body.
- nesting: at most :data:`MAX_DEPTH` arrays/objects inside each other. The parsed value is
  encoded again anyway (duplicate keys, below), inside a chain of arrays just long enough that
  orjson's own encoding limit (probed at import) falls on ours: the check costs no walk of its
  own. orjson's parse limit (1,024 levels) bounds what is parsed at all. Wrapping the body's
  bytes instead would make every body's one parse a parse of a larger document.
- numbers: orjson refuses a number that overflows a double (``1e400``); integers of any size
  are kept verbatim. ``NaN``/``Infinity`` are not JSON (msgspec and orjson refuse them).
- duplicate keys: orjson keeps the last, so the parsed value is encoded again; when that gives
  back the body (compact bodies from ordinary encoders do), no key was dropped. Otherwise the
  body is compacted, compared again, and only a body that still differs (escapes, exponents)
  is parsed once more with a pair hook that sees every key.
"""

from __future__ import annotations

import json
import threading

import msgspec
import orjson

from reginamq.common.errors import BadRequest

MAX_DEPTH = 64


def _encoding_limit() -> int:
    """The deepest nesting orjson encodes (it refuses deeper values with JSONEncodeError)."""
    low, high = 1, 4096  # low encodes; high is refused
    while high - low > 1:
        middle = (low + high) // 2
        value: object = 0
        for _ in range(middle):
            value = [value]
        try:
            orjson.dumps(value)
            low = middle
        except orjson.JSONEncodeError:
            high = middle
    return low


_WRAP = _encoding_limit() - MAX_DEPTH  # arrays around a value so that orjson refuses it past MAX_DEPTH
if _WRAP < 1:
    raise ImportError(f"orjson encodes only {_WRAP + MAX_DEPTH} levels, fewer than {MAX_DEPTH}")


class _Chain(threading.local):
    """Per thread: :data:`_WRAP` arrays inside each other; the innermost holds the value checked."""

    def __init__(self) -> None:
        self.innermost: list = [None]
        self.outermost: list = self.innermost
        for _ in range(_WRAP - 1):
            self.outermost = [self.outermost]


_chain = _Chain()


def check(body: bytes) -> None:
    """Raise BadRequest unless ``body`` is strict JSON within the limits above."""
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadRequest(f"the body is not valid UTF-8 (byte {error.start})") from None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise _refusal(body, str(error)) from None
    _chain.innermost[0] = value
    try:
        wrapped = orjson.dumps(_chain.outermost)
    except orjson.JSONEncodeError:  # a value orjson parsed encodes unless it nests too deep
        raise _too_deep() from None
    finally:
        _chain.innermost[0] = None
    encoded = wrapped[_WRAP:-_WRAP]
    if encoded == body or encoded == msgspec.json.format(body, indent=-1):
        return
    try:
        json.loads(body, object_pairs_hook=_unique_keys)
    except ValueError as error:  # including int digits beyond Python's conversion limit
        raise BadRequest(str(error) if isinstance(error, _DuplicateKey) else f"number out of range: {error}") \
            from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key[:64]!r} in a JSON object")
            seen.add(key)
    return value


def _too_deep() -> BadRequest:
    return BadRequest(f"JSON nested deeper than {MAX_DEPTH} levels")


def _refusal(body: bytes, message: str) -> BadRequest:
    if "depth" in message or "ecursion" in message:
        return _too_deep()
    if "infinity" in message:
        return BadRequest("number out of range: a JSON number must fit a double")
    try:  # msgspec names the position and what it expected there
        msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        return BadRequest(f"malformed JSON: {error}")
    except (msgspec.ValidationError, RecursionError):
        pass
    return BadRequest(f"malformed JSON: {message.split(': line')[0]}")
