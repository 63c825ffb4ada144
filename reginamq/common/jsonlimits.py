"""Strict JSON: the limits msgspec does not enforce on a request body, checked cheaply.

msgspec decodes the body into the request's shape but hands payloads over as raw bytes and
keeps the last of duplicate keys; on its own it would accept (and store) a payload with
invalid UTF-8, a key given twice, a number no double can hold, or nesting thousands of levels
deep that some consumers cannot decode. :func:`check` refuses all of them with a 400, for
the whole body (the structures the broker reads and the payloads it stores alike):

- UTF-8: ``bytes.isascii`` (or one ``decode``) over the body.
- nesting: at most :data:`MAX_DEPTH` arrays/objects inside each other, counted on the parsed
  value one level at a time (a list comprehension a level, stopping at the limit), unless the
  body is small and has at most that many ``[`` and ``{`` bytes (a payload of a binary push,
  where counting the bytes costs less than the walk). orjson's own limit (1,024 levels)
  bounds what is parsed at all. Wrapping the body in extra arrays so that orjson's limit fell
  on ours instead would make every body's one parse a parse of a larger document.
- numbers: orjson refuses a number that overflows a double (``1e400``); integers of any size
  are kept verbatim. ``NaN``/``Infinity`` are not JSON (msgspec and orjson refuse them).
- duplicate keys: orjson keeps the last, so the parsed value is encoded again; when that gives
  back the body (compact bodies from ordinary encoders do), no key was dropped. Otherwise the
  body is compacted, compared again, and only a body that still differs (escapes, exponents)
  is parsed once more with a pair hook that sees every key.
"""

from __future__ import annotations

import json

import msgspec
import orjson

from reginamq.common.errors import BadRequest

MAX_DEPTH = 64
# Bodies up to this size have their brackets counted before the nesting is walked; beyond it
# the count would cost about what it can save.
_COUNTED_BYTES = 16_384


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
    if _may_nest_deeper(body) and _deeper_than(value, MAX_DEPTH):
        raise _too_deep()
    encoded = orjson.dumps(value)
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


def _may_nest_deeper(body: bytes) -> bool:
    """False for a small body with too few ``[``/``{`` bytes to nest past the limit (a binary
    push checks each payload on its own: the count costs less than the walk for those)."""
    return len(body) > _COUNTED_BYTES or body.count(b"[") + body.count(b"{") > MAX_DEPTH


def _deeper_than(value: object, limit: int) -> bool:
    """Whether a parsed value nests more than ``limit`` arrays/objects, one level at a time."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(limit):
        if not level:
            return False
        level = [child for node in level for child in (node.values() if type(node) is dict else node)
                 if type(child) is dict or type(child) is list]
    return bool(level)
