"""Queen 2.x's locks and semaphores: what queen-mq's ``client.lock()``, ``client.semaphore()`` and
``client.locks`` ask of POST /api/v1/locks.

A permit is a key/value row with a lifetime (store/sql/017_locks.sql): acquire takes a free
slot, renew moves it to a new token and lifetime, release deletes it at its token, get lists the
live holders. A permit expires without telling its holder, so the lock alone never makes two
holders impossible; the token does: each answer carries the ``guard`` (a required kv ``check``
of the permit at its token) that a transaction commits under, so a replaced holder's step
commits nothing.

Ops of one call are independent (each commits on its own) and each answers 200 with its verdict:
a lock somebody else holds is ``acquired: false``, never an error. A malformed op refuses the
whole call with a 400 before anything runs.
"""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

import msgspec
import orjson

from reginamq.common.errors import refuse
from reginamq.store import Store

MAX_NAME_BYTES = 256
MAX_OWNER_BYTES = 256
MAX_LIMIT = 1024
MAX_OPS = 64
MAX_TTL_SECONDS = 365 * 86_400
OPS = ("acquire", "renew", "release", "get")


class LockOp(msgspec.Struct):
    op: str
    name: Any = None
    ttlSeconds: Any = None
    owner: Any = None
    limit: Any = None
    token: Any = None
    slot: Any = None


def _refuse(where: str, detail: str) -> NoReturn:
    refuse("lock_bad_request", f"{where}: {detail}")


def _text(where: str, field: str, value: Any, ceiling: int, *, no_hash: bool = False) -> str:
    if (not isinstance(value, str) or not value or len(value.encode()) > ceiling
            or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value) or (no_hash and "#" in value)):
        _refuse(where, f"{field} is a non-empty string of at most {ceiling} bytes without control characters"
                       + (" and without '#'" if no_hash else ""))
    return value


def _integer(where: str, field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        _refuse(where, f"{field} must be an integer from {low} to {high}")
    return value


def _arguments(index: int, op: LockOp) -> tuple:
    """The op's arguments for the store, after its fields are checked."""
    where = f"op at index {index}"
    if op.op not in OPS:
        _refuse(where, f"unknown operation {op.op!r} (one of acquire, renew, release, get)")
    name = _text(where, "name", op.name, MAX_NAME_BYTES, no_hash=True)
    owner = None if op.owner is None else _text(where, "owner", op.owner, MAX_OWNER_BYTES)
    if op.op == "get":
        return (name,)
    token = None if op.op == "acquire" else _integer(where, "token", op.token, 1, 2**63 - 1)
    slot = None if op.slot is None else _integer(where, "slot", op.slot, 0, MAX_LIMIT - 1)
    if op.op == "release":
        return name, token, slot
    ttl = _integer(where, "ttlSeconds", op.ttlSeconds, 1, MAX_TTL_SECONDS)
    if op.op == "renew":
        return name, token, slot, owner, ttl
    limit = 1 if op.limit is None else _integer(where, "limit", op.limit, 1, MAX_LIMIT)
    return name, owner or str(uuid.uuid4()), ttl, limit


def prepare(operations: list[LockOp]) -> list[tuple[str, tuple]]:
    if len(operations) > MAX_OPS:
        refuse("lock_bad_request", f"at most {MAX_OPS} operations a call")
    return [(op.op, _arguments(index, op)) for index, op in enumerate(operations)]


async def run(store: Store, prepared: list[tuple[str, tuple]]) -> list[dict]:
    """Each op in its own statement (its own transaction): one op's verdict never undoes another's."""
    calls = {"acquire": store.locks.acquire, "renew": store.locks.renew, "release": store.locks.release,
             "get": store.locks.holders}
    results = []
    for index, (kind, arguments) in enumerate(prepared):
        answer = orjson.loads(await calls[kind](*arguments))
        if kind == "get":
            answer["held"] = bool(answer["holders"])
        results.append({"index": index, "op": kind, "name": arguments[0], **answer})
    return results
