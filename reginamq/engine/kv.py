"""Queen 2.x's key/value store: what queen-mq's ``client.kv`` and a transaction's ``tx.kv`` ask.

A key holds a JSON value with a version (equality only: a new number from a sequence at every
write) and an expiry that every write must state (``ttlSeconds`` or ``forever: true``; a put
never inherits the previous one). An expired key is absent for every reader and precondition
before the stats loop deletes it. The point of the store is that a key written in a
transaction commits with the transaction's acks and pushes (an idempotency marker, a counter,
a saga step), so a redelivered message meets its own marker.

A call is validated whole before the database is touched, each refusal a 400 whose ``error`` is
Queen's code (``kv_bad_namespace``, ``kv_expiry_not_specified``, ...) and ``detail`` says which
op. Then it runs in one database transaction (store/sql/016_kv.sql): writes and checks in byte
order of (namespace, key) -- the lock order that keeps two calls sharing keys from deadlocking,
hence a key may be written at most once a call -- and the reads of many keys last, so they see
the call's writes. A lost precondition is a verdict (``applied: false`` with the reason and
what a reader sees), unless the op is ``required``: then nothing of the call (or of the
transaction carrying it) commits, and :class:`PreconditionLost` says which op lost and why.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from reginamq.common.errors import refuse
from reginamq.engine.op_batch import OpBatch
from reginamq.store import Store
from reginamq.store.kv import PreconditionFailed

NAMESPACE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 65_536
MAX_READ_BYTES = 4 * 1024 * 1024
PREFIX_LIMIT_DEFAULT, PREFIX_LIMIT_MAX = 100, 1000
MAX_TTL_SECONDS = 100 * 365 * 86_400
MAX_OPS = {False: 256, True: 64}       # by whether the call rides in a transaction
MAX_KEYS = {False: 4096, True: 256}
INT64 = 2**63 - 1
WRITES = ("put", "putIfAbsent", "delete", "incr", "check")
OPS = (*WRITES, "get", "getMany", "getPrefix")
TENANT_FIELDS = ("tenant", "tenantId", "_tenant")


class PreconditionLost(Exception):
    """A ``required`` op lost its precondition: the whole call rolled back."""

    def __init__(self, index: int, reason: str, version: int, value: Any):
        super().__init__("kv_precondition_failed")
        self.index, self.reason, self.version, self.value = index, reason, version, value

    def answer(self, failed_index: int) -> dict:
        """Queen's verdict fields; ``failed_index`` in the caller's index space."""
        return {"ok": False, "success": False, "reason": "kv_precondition", "error": "kv_precondition_failed",
                "failedIndex": failed_index, "kvReason": self.reason, "version": self.version,
                "value": self.value}


def _scalar(op: dict[str, msgspec.Raw], field: str) -> Any:
    raw = op.get(field)
    return None if raw is None else msgspec.json.decode(raw)


def _whole(value: Any) -> bool:
    """A JSON integer (7 or 7.0) within int64."""
    if isinstance(value, float):
        return value.is_integer() and abs(value) <= INT64
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= INT64


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and abs(value) <= INT64


def _check_key(where: str, namespace: Any, key: Any, what: str = "key") -> None:
    if not isinstance(namespace, str) or not NAMESPACE.fullmatch(namespace):
        refuse("kv_bad_namespace", f"{where}: namespace {namespace!r} does not match ^[a-z0-9][a-z0-9._-]{{0,63}}$")
    if not isinstance(key, str) or not key:
        refuse("kv_bad_key", f"{where}: the {what} must be a non-empty string")
    if "\x00" in key:
        refuse("kv_bad_key", f"{where}: the {what} must not contain NUL")
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        refuse("kv_key_too_large", f"{where}: the {what} is {size} bytes, the ceiling is {MAX_KEY_BYTES}")


def _holds_nul(value: Any) -> bool:
    """Whether a JSON value holds U+0000 in a string or key (PostgreSQL's jsonb cannot)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    if isinstance(value, dict):
        return any("\x00" in key or _holds_nul(item) for key, item in value.items())
    return False


def _expiry(where: str, op: dict[str, msgspec.Raw], normal: dict) -> None:
    declared = 0
    if "ttlSeconds" in op:
        declared += 1
        ttl = _scalar(op, "ttlSeconds")
        if not _whole(ttl) or not 0 < ttl <= MAX_TTL_SECONDS:
            refuse("kv_bad_ttl", f"{where}: ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS}")
        normal["ttl"] = int(ttl)
    if "forever" in op and _scalar(op, "forever") is True:
        declared += 1
    if declared != 1:
        refuse("kv_expiry_not_specified",
                f"{where}: exactly one of ttlSeconds (an integer above 0) and forever:true is required, got {declared}")


def _expect(where: str, kind: str, op: dict[str, msgspec.Raw], normal: dict) -> None:
    if kind == "putIfAbsent":
        if "expect" in op and _scalar(op, "expect") != 0:
            refuse("kv_bad_expect", f"{where}: putIfAbsent is a put with expect 0; another expect contradicts it")
        normal["expect"] = 0
        return
    if "expect" not in op:
        if kind == "check":
            refuse("kv_bad_expect", f"{where}: check needs expect (a version, or 0 for a key that must not exist)")
        return
    expect = _scalar(op, "expect")
    if not _whole(expect) or expect < 0:
        refuse("kv_bad_expect", f"{where}: expect must be a non-negative integer version (0: must not exist)")
    normal["expect"] = int(expect)


def _prepare_op(index: int, raw: msgspec.Raw, in_transaction: bool) -> tuple[dict, int]:
    """One op as rq_kv_apply reads it, and how many keys it may touch."""
    where = f"op at index {index}"
    try:
        op = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        refuse("kv_bad_request", f"{where} is not an object")
    kind = _scalar(op, "op")
    if kind not in OPS:
        refuse("kv_unknown_op", f"{where}: unknown operation {kind!r} (one of {', '.join(OPS)})")
    if any(field in op for field in TENANT_FIELDS):
        refuse("kv_tenant_not_an_input", f"{where} carries a tenant field; a tenant is not part of an op")
    namespace = _scalar(op, "ns")
    normal: dict[str, Any] = {"i": index, "shown": kind, "op": "put" if kind == "putIfAbsent" else kind,
                              "ns": namespace}
    if "required" in op:
        required = _scalar(op, "required")
        if not isinstance(required, bool):
            refuse("kv_bad_request", f"{where}: required must be a boolean")
        if required and kind in WRITES:
            normal["required"] = True
    keys = 1
    if kind == "getPrefix":
        if in_transaction:
            refuse("kv_get_prefix_not_allowed_in_transaction",
                    f"{where}: getPrefix is only available on POST /api/v1/kv")
        prefix = _scalar(op, "prefix")
        if not isinstance(prefix, str) or not prefix:
            refuse("kv_prefix_required", f"{where}: getPrefix needs a non-empty prefix")
        _check_key(where, namespace, prefix, "prefix")
        normal["prefix"] = prefix
        after = _scalar(op, "after")
        if after not in (None, ""):
            _check_key(where, namespace, after, "after cursor")
            normal["after"] = after
        limit = _scalar(op, "limit")
        if limit is not None and not _whole(limit):
            refuse("kv_bad_request", f"{where}: limit must be an integer")
        asked = PREFIX_LIMIT_DEFAULT if limit is None else int(limit)
        keys = normal["limit"] = min(max(asked, 1), PREFIX_LIMIT_MAX)  # clamped, never refused
        if _scalar(op, "keysOnly") is True:
            normal["keysOnly"] = True
    elif kind == "getMany":
        wanted = _scalar(op, "keys")
        if not isinstance(wanted, list):
            refuse("kv_bad_request", f"{where}: getMany needs a keys array")
        for key in wanted:
            _check_key(where, namespace, key)
        normal["keys"], keys = wanted, len(wanted)
    else:
        key = _scalar(op, "key")
        _check_key(where, namespace, key)
        normal["key"] = key
    if kind in ("put", "putIfAbsent", "incr"):
        _expiry(where, op, normal)
    if kind in ("put", "putIfAbsent"):
        if "value" not in op:
            refuse("kv_bad_request", f"{where}: {kind} needs a value (null is a value; an absent one is not)")
        value = op["value"]
        if len(value) > MAX_VALUE_BYTES:
            refuse("kv_value_too_large", f"{where}: the value is {len(value)} bytes, the ceiling is {MAX_VALUE_BYTES}")
        if b"\\u0000" in bytes(value).lower() and _holds_nul(msgspec.json.decode(value)):
            refuse("kv_bad_value", f"{where}: the value holds U+0000, which no stored JSON can")
        normal["value"] = value
    if kind in ("put", "putIfAbsent", "delete", "check"):
        _expect(where, kind, op, normal)
    elif "expect" in op:
        refuse("kv_bad_request", f"{where}: {kind} takes no expect")
    if kind == "incr":
        delta = _scalar(op, "delta")
        if not _number(delta):
            refuse("kv_bad_request", f"{where}: incr needs a numeric delta")
        normal["delta"] = delta
        for bound in ("min", "max"):
            value = _scalar(op, bound)
            if value is not None:
                if not _number(value):
                    refuse("kv_bad_request", f"{where}: {bound} must be numeric")
                normal[bound] = value
    return normal, keys


def prepare(operations: list[msgspec.Raw], *, in_transaction: bool = False) -> OpBatch:
    """Validate a call's ops and put them in apply order (see the module's docstring)."""
    if len(operations) > MAX_OPS[in_transaction]:
        refuse("kv_too_many_ops", f"{len(operations)} ops in one call, the ceiling is {MAX_OPS[in_transaction]}")
    ops, keys, written = [], 0, set()
    for index, raw in enumerate(operations):
        normal, touched = _prepare_op(index, raw, in_transaction)
        keys += touched
        if normal["shown"] in WRITES:
            identity = (normal["ns"], normal["key"])
            if identity in written:
                refuse("kv_duplicate_key_in_call",
                        f"op at index {index}: a key may be written or checked at most once a call")
            written.add(identity)
        ops.append(normal)
    if keys > MAX_KEYS[in_transaction]:
        refuse("kv_too_many_keys", f"{keys} keys in one call, the ceiling is {MAX_KEYS[in_transaction]}")
    # Python's str order is code-point order, which is UTF-8 byte order: PostgreSQL's COLLATE "C".
    ops.sort(key=lambda op: (op["op"] in ("getMany", "getPrefix"), op["ns"], op.get("key") or op.get("prefix") or "",
                             op["i"]))
    return OpBatch(msgspec.json.encode(ops), len(ops))


async def apply(store: Store, prepared: OpBatch) -> list[dict]:
    """Run the ops in ``store``'s transaction (one of :meth:`Store.atomically`: the call's own,
    or the transaction's that carries the rider); results in the order the ops came."""
    if not prepared.count:
        return []
    try:
        answer = await store.kv.apply(prepared.ops.decode(), MAX_READ_BYTES)
    except PreconditionFailed as failed:
        raise PreconditionLost(failed.index, failed.reason, failed.version, failed.value) from None
    # msgspec, not orjson: a stored integer past 64 bits comes back exactly
    applied = msgspec.json.decode(answer)
    results: list[dict] = [{}] * prepared.count
    for result in applied:
        results[result["index"]] = result
    return results
