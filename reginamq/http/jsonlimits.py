"""Strict JSON: the limits msgspec does not enforce on a request body, checked cheaply.

msgspec decodes the body into the request's shape but hands payloads over as raw bytes and
keeps the last of duplicate keys; on its own it would accept (and store) a payload with
invalid UTF-8, a key given twice, a number no double can hold, or nesting thousands of levels
deep that some consumers cannot decode. :func:`check` refuses all of them with a 400, for
the whole body (the structures the broker reads and the payloads it stores alike):

- UTF-8: ``bytes.isascii`` (or one ``decode``) over the body.
- nesting: at most :data:`MAX_DEPTH` arrays/objects inside each other. A small body with at
  most that many ``[`` and ``{`` bytes cannot nest deeper, and is parsed as it is. Otherwise,
  since orjson refuses a document nested deeper than a fixed limit (:data:`_ORJSON_DEPTH`,
  measured at import), the body is parsed inside ``_ORJSON_DEPTH - MAX_DEPTH`` extra arrays,
  so that limit falls exactly on ours: no cost per byte, but a fixed ~50 µs for the extra
  arrays, which is most of the check for a small body (hence the count first).
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

from reginamq.engine.errors import BadRequest

MAX_DEPTH = 64


def _orjson_depth_limit() -> int | None:
    """orjson's fixed nesting limit (1024 in every release so far), or None if it changed."""
    for limit in (1024,):
        try:
            orjson.loads(b"[" * limit + b"]" * limit)
        except orjson.JSONDecodeError:
            continue
        try:
            orjson.loads(b"[" * (limit + 1) + b"]" * (limit + 1))
        except orjson.JSONDecodeError:
            return limit
    return None


_ORJSON_DEPTH = _orjson_depth_limit()
_PAD = 0 if _ORJSON_DEPTH is None else _ORJSON_DEPTH - MAX_DEPTH
_OPEN, _CLOSE = b"[" * _PAD, b"]" * _PAD
# Bodies up to this size have their brackets counted (a few µs) before the padded parse is
# considered; beyond it the count would cost about what it can save.
_COUNTED_BYTES = 16_384


def check(body: bytes) -> None:
    """Raise BadRequest unless ``body`` is strict JSON within the limits above."""
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadRequest(f"the body is not valid UTF-8 (byte {error.start})") from None
    shallow = len(body) <= _COUNTED_BYTES and body.count(b"[") + body.count(b"{") <= MAX_DEPTH
    padded = _PAD and not shallow
    try:
        value = orjson.loads(_OPEN + body + _CLOSE if padded else body)
    except orjson.JSONDecodeError as error:
        raise _refusal(body, str(error)) from None
    if padded:
        for _ in range(_PAD):
            value = value[0]
    elif not shallow and _depth(value) > MAX_DEPTH:
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
    try:  # msgspec's message points into the body as sent (ours is offset by the padding)
        msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        return BadRequest(f"malformed JSON: {error}")
    except (msgspec.ValidationError, RecursionError):
        pass
    return BadRequest(f"malformed JSON: {message.split(': line')[0]}")


def _depth(value: object) -> int:
    """Nesting depth of a parsed value (only used if orjson's limit could not be measured)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
