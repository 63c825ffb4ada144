"""The broker's OpenAPI 3.1 document (GET /openapi.json), built from a route table.

:func:`document` is given the route table by its caller (reginamq/http/routes.py, which serves
the document and builds it once), so this module never imports the table it describes. Every
route needs an entry in :data:`OPERATIONS`; a route without one fails the build (and
tests/contract/test_openapi.py).

Request bodies decoded into msgspec Structs take their schemas from the Structs, tightened
with the documented limits (names, UUIDs); bodies read as plain objects are described by hand.
Parameter ranges and enums are the ones the handlers enforce. Response schemas list the fields
each answer always has and allow more (``additionalProperties``), so they check without
freezing the protocol. Each operation carries its route's role (``x-required-role``) and bearer
security, taken from the route table, so the document cannot disagree with what the broker
enforces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec
import orjson

from reginamq import __version__
from reginamq.engine import (
    ack,
    ephemeral,
    kv,
    locks,
    message_admin,
    options,
    pop,
    push,
    queues,
    reads,
    streams,
    timers,
    traces,
    transaction,
)
from reginamq.engine.names import MAX_NAME_LENGTH
from reginamq.http import binary_push, console
from reginamq.security.roles import PUBLIC

MAX_PAGE = 1_000
INT32 = 2**31 - 1

# -- schema building blocks -------------------------------------------------------------------

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": "^[^\\x00-\\x1f\\x7f]+$"}
# A queue name (and any name in a path segment) holds no '/'. '.' and '..' are left out too:
# HTTP clients resolve them as path segments before the broker sees the path.
SEGMENT = {**NAME, "pattern": "^(?!\\.\\.?$)[^/\\x00-\\x1f\\x7f]+$"}
UUID = {"type": "string", "format": "uuid"}
TIMESTAMP = {"type": "string", "description": "'now' or an ISO-8601 timestamp (without a zone: UTC)",
             "anyOf": [{"const": "now"}, {"format": "date-time"}]}
STAMP = {"type": "string"}  # answered as ISO-8601 with milliseconds, UTC
NULLABLE_STAMP = {"type": ["string", "null"]}
NULLABLE_STRING = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}
ANY: dict = {}


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict:
    """An object with these fields (all required unless ``required`` says otherwise); more are allowed."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, "additionalProperties": True}


def array(items: dict) -> dict:
    return {"type": "array", "items": items}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


ERROR = obj({"error": {"type": "string", "minLength": 1}})

# -- parameters ---------------------------------------------------------------------------------


def path(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def query(name: str, schema: dict, description: str = "", required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def int_range(low: int, high: int, default: int | None = None) -> dict:
    schema = {"type": "integer", "minimum": low, "maximum": high}
    return schema if default is None else {**schema, "default": default}


QUERY_BOOL = {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no", "True", "False"]}
PAGE = [query("limit", int_range(1, MAX_PAGE, 100)), query("offset", int_range(0, INT32, 0))]
QUEUE_PATH = path("queue", SEGMENT)
GROUP_PATH = path("group", SEGMENT, "consumer group")
GREEDY = "the rest of the path: the name may hold '/', sent unencoded (described here without)"
POP_PARAMETERS = [
    query("batch", int_range(1, pop.MAX_BATCH),
          f"messages per pop (default {pop.DEFAULT_BATCH}; with autopilot the broker's choice)"),
    query("partitions", int_range(1, pop.MAX_PARTITIONS_PER_POP),
          f"partitions one pop may lease (default {pop.DEFAULT_PARTITIONS}; with autopilot the broker's choice)"),
    query("autoAck", QUERY_BOOL),
    query("wait", QUERY_BOOL, "long poll until a message arrives or timeout passes"),
    query("timeout", int_range(0, pop.MAX_TIMEOUT_MS, pop.DEFAULT_TIMEOUT_MS), "milliseconds a long poll waits"),
    query("leaseSeconds", int_range(0, options.MAX_SECONDS, 0), "0 = the queue's leaseTime"),
    query("consumerGroup", NAME, "default: queue mode"),
    query("subscriptionMode", {"type": "string", "enum": list(pop.SUBSCRIPTION_MODES)},
          "where a named group starts at its first pop: all = the backlog, new = messages pushed from then on; "
          "default: the broker's --default-subscription-mode (new)"),
    query("subscriptionFrom", TIMESTAMP),
    query("autopilot", QUERY_BOOL, "the broker sizes batch and/or partitions where they are not given"),
    query("conflation", QUERY_BOOL, "last-value delivery: a named group's policy, fixed at its first pop"),
    query("frames", QUERY_BOOL, "the messages as binary frames (application/x-queen-pop) where they fit"),
]

# -- answers ------------------------------------------------------------------------------------

PUSH_RESULT = obj({"index": INTEGER, "message_id": STRING, "transaction_id": STRING, "queueName": STRING,
                   "status": {"type": "string", "enum": ["queued", "duplicate", "buffered"]}})
KV_OP = obj({"op": {"type": "string", "enum": list(kv.OPS)},
             "ns": {"type": "string", "pattern": f"^{kv.NAMESPACE.pattern}$"},
             "key": {"type": "string", "minLength": 1}, "keys": array(STRING), "prefix": STRING, "after": STRING,
             "limit": INTEGER, "keysOnly": BOOLEAN, "value": ANY, "ttlSeconds": int_range(1, kv.MAX_TTL_SECONDS),
             "forever": {"const": True}, "expect": int_range(0, kv.INT64), "required": BOOLEAN,
             "delta": {"type": "number"}, "min": {"type": "number"}, "max": {"type": "number"}}, ["op", "ns"])
KV_RESULT = obj({"index": INTEGER, "op": STRING, "key": STRING, "applied": BOOLEAN, "found": BOOLEAN,
                 "reason": STRING, "value": ANY, "version": INTEGER, "expiresAt": NULLABLE_STAMP,
                 "updatedAt": STAMP, "rows": array(ANY), "missing": array(STRING), "truncated": BOOLEAN,
                 "nextAfter": NULLABLE_STRING}, ["index", "op"])
KV_PATH = [path("ns", KV_OP["properties"]["ns"]), path("key", SEGMENT, GREEDY)]
# a required op that lost its precondition: the call rolled back
KV_LOST = obj({"ok": {"const": False}, "success": {"const": False}, "reason": {"const": "kv_precondition"},
               "error": STRING, "failedIndex": INTEGER, "kvReason": STRING, "version": INTEGER, "value": ANY,
               "results": array(ANY)}, ["ok", "reason", "failedIndex", "kvReason"])
KV_ONE = {"anyOf": [KV_RESULT, KV_LOST]}
LOCK_OP = obj({"op": {"type": "string", "enum": list(locks.OPS)}, "name": STRING,
               "ttlSeconds": int_range(1, locks.MAX_TTL_SECONDS), "owner": STRING,
               "limit": int_range(1, locks.MAX_LIMIT), "token": int_range(1, kv.INT64),
               "slot": int_range(0, locks.MAX_LIMIT - 1)}, ["op", "name"])
TIMER_OP = obj({"op": {"type": "string", "enum": list(timers.OPS)}, "queue": SEGMENT, "timerKey": NAME,
                "payload": {"type": "string", "contentEncoding": "base64"}, "payloadZstd": BOOLEAN,
                "delayMs": int_range(-timers.MAX_DELAY_MS, timers.MAX_DELAY_MS), "txn": NAME, "partition": NAME},
               ["op", "queue", "timerKey"])
TIMER_RESULT = obj({"index": INTEGER, "op": STRING, "queue": STRING, "timerKey": STRING, "ok": BOOLEAN,
                    "status": {"type": "string", "enum": ["scheduled", "rescheduled", "cancelled", "absent",
                                                          "too_late"]},
                    "txn": NULLABLE_STRING, "messageId": STRING, "deliverAt": STAMP, "partition": STRING},
                   ["index", "op", "queue", "timerKey", "ok", "status"])
TIMER_ROW = obj({"queue": STRING, "timerKey": STRING, "partition": STRING, "txn": STRING, "messageId": STRING,
                 "deliverAt": STAMP, "attempts": INTEGER, "lastError": NULLABLE_STRING, "createdAt": STAMP,
                 "updatedAt": STAMP})
EPH_ERROR = obj({"error": STRING, "code": STRING})
EPH_OPTIONS = obj({"maxBytes": int_range(0, ephemeral.MAX_OPTION), "maxLength": int_range(0, ephemeral.MAX_OPTION),
                   "policy": {"type": "string", "enum": list(ephemeral.POLICIES)},
                   "ttlSeconds": int_range(0, ephemeral.MAX_OPTION), "leaseSeconds": int_range(0, ephemeral.MAX_OPTION),
                   "retryLimit": int_range(0, ephemeral.MAX_OPTION),
                   "windowBuffer": obj({"ms": int_range(0, ephemeral.MAX_OPTION),
                                        "count": int_range(0, ephemeral.MAX_OPTION)}, [])}, [])
# the binary push body's flag 2 (http/binary_push.py)
PUSH_COUNTS = obj({"count": INTEGER, "queued": INTEGER, "duplicate": INTEGER, "error": INTEGER, "buffered": INTEGER},
                  ["count", "queued", "duplicate", "error"])
MESSAGE = obj({"id": STRING, "transactionId": STRING, "traceId": NULLABLE_STRING, "data": ANY,
               "createdAt": STAMP, "partitionId": STRING, "partition": STRING, "leaseId": STRING,
               "consumerGroup": STRING, "deliveryAttempt": INTEGER},
              ["id", "transactionId", "data", "createdAt", "partitionId", "partition"])
POP = obj({"success": BOOLEAN, "queue": STRING, "partition": STRING, "partitionId": STRING,
           "leaseId": STRING, "consumerGroup": STRING, "partitionsClaimed": INTEGER, "messages": array(MESSAGE),
           "conflation": {"const": True}, "conflationConflict": {"const": True},
           "autopilot": obj({"partitions": INTEGER, "batch": INTEGER, "waitMs": INTEGER})},
          ["success", "queue", "partition", "partitionId", "leaseId", "consumerGroup", "partitionsClaimed",
           "messages"])
POP_ERROR = obj({"success": {"const": False}, "error": STRING, "messages": array(ANY)}, ["error"])
FRAMED_POP = "application/x-queen-pop"
ACK_RESULT = obj({"index": INTEGER, "transactionId": STRING, "success": BOOLEAN, "error": NULLABLE_STRING,
                  "leaseReleased": BOOLEAN, "dlq": BOOLEAN, "noop": BOOLEAN},
                 ["index", "transactionId", "success"])
EXTEND = obj({"leaseId": STRING, "success": BOOLEAN, "renewed": {"type": ["integer", "boolean"]},
              "newExpiresAt": STAMP, "expiresAt": STAMP, "lease_expires_at": STAMP},
             ["leaseId", "success", "renewed"])
# one per ack and one per pushed item, in request order, then one per op of the kv and timers
# riders (engine/transaction.py)
TRANSACTION_RESULT = {"anyOf": [
    obj({"index": INTEGER, "type": {"type": "string", "enum": ["ack", "push"]}, "success": BOOLEAN,
         "transactionId": STRING, "error": NULLABLE_STRING, "leaseReleased": BOOLEAN, "dlq": BOOLEAN,
         "messageId": STRING, "partitionId": STRING, "queueName": STRING, "status": STRING},
        ["index", "type", "success", "transactionId"]),
    {**KV_RESULT, "properties": {**KV_RESULT["properties"], "type": {"const": "kv"}, "opIndex": INTEGER},
     "required": ["index", "op", "type", "opIndex"]},
    {**TIMER_RESULT, "properties": {**TIMER_RESULT["properties"], "type": {"const": "timer"}, "opIndex": INTEGER},
     "required": ["index", "op", "type", "opIndex", "ok", "status"]}]}
TRANSACTION = obj({"transactionId": STRING, "success": BOOLEAN, "results": array(TRANSACTION_RESULT),
                   "pushed": INTEGER, "duplicate": INTEGER, "acked": INTEGER,  # binary body, flag 2
                   "reason": {"type": "string", "enum": ["lease_expired", "ack_rejected", "duplicate", "queue_full",
                                                         "kv_precondition"]},
                   "error": STRING}, ["transactionId", "success", "results"])
OPTIONS_OUT = {"type": "object"}
CONFIGURED = obj({"configured": BOOLEAN, "queueId": STRING, "queue": STRING, "namespace": NULLABLE_STRING,
                  "task": NULLABLE_STRING, "options": OPTIONS_OUT})
HEALTH = obj({"status": {"type": "string", "enum": ["healthy", "unhealthy"]}, "database": STRING,
              "version": STRING})
DLQ_ENTRY = obj({"id": STRING, "messageId": STRING, "transactionId": STRING, "traceId": NULLABLE_STRING,
                 "partitionId": STRING, "queue": STRING, "partition": STRING, "consumerGroup": NULLABLE_STRING,
                 "errorMessage": NULLABLE_STRING, "retryCount": INTEGER, "data": ANY, "createdAt": STAMP,
                 "failedAt": STAMP})
PAGED = {"total": INTEGER, "limit": INTEGER, "offset": INTEGER}
QUEUE_ENTRY = obj({"name": STRING, "id": STRING, "namespace": NULLABLE_STRING, "task": NULLABLE_STRING,
                   "options": OPTIONS_OUT, "messages": INTEGER, "pending": INTEGER, "consumerGroups": INTEGER,
                   "dlq": INTEGER, "expired": INTEGER, "lastWriteAt": NULLABLE_STAMP, "createdAt": STAMP,
                   "updatedAt": STAMP})
PARTITION_ENTRY = obj({"id": STRING, "name": STRING, "queue": STRING, "lastOffset": INTEGER, "logStart": INTEGER,
                       "messages": INTEGER, "pending": INTEGER, "cursors": INTEGER,
                       "oldestPendingAt": NULLABLE_STAMP, "lastWriteAt": NULLABLE_STAMP, "createdAt": STAMP})
GROUP_ENTRY = obj({"name": STRING, "queueName": STRING, "topics": array(STRING), "members": INTEGER,
                   "cursors": INTEGER, "partitions": INTEGER, "partitionsWithLag": INTEGER, "totalLag": INTEGER,
                   "maxTimeLag": INTEGER, "oldestPendingAt": NULLABLE_STAMP,
                   "state": {"type": "string", "enum": ["Stable", "Lagging", "Dead"]},
                   "subscriptionMode": NULLABLE_STRING, "subscriptionTimestamp": NULLABLE_STAMP,
                   "subscriptionCreatedAt": NULLABLE_STAMP, "conflation": BOOLEAN})
GROUP_PARTITION = obj({"partition": STRING, "workerId": NULLABLE_STRING, "lastConsumedAt": NULLABLE_STAMP,
                       "totalConsumed": INTEGER, "offsetLag": INTEGER, "timeLagSeconds": INTEGER,
                       "leaseActive": BOOLEAN, "leaseExpiresAt": NULLABLE_STAMP, "partitionId": STRING,
                       "committed": NULLABLE_INT, "position": INTEGER, "lastOffset": INTEGER,
                       "logStart": INTEGER, "oldestPendingAt": NULLABLE_STAMP, "leasedFrom": NULLABLE_INT,
                       "leasedTo": NULLABLE_INT})
# Queen's detail of a group: one entry per queue it reads, keyed by the queue's name.
GROUP_QUEUE = obj({"conflation": BOOLEAN, "partitions": array(GROUP_PARTITION),
                   "state": GROUP_ENTRY["properties"]["state"], "subscriptionMode": NULLABLE_STRING,
                   "subscriptionTimestamp": NULLABLE_STAMP, "subscriptionCreatedAt": NULLABLE_STAMP,
                   "partitionCount": INTEGER, "cursors": INTEGER, "members": INTEGER, "totalLag": INTEGER,
                   "partitionsWithLag": INTEGER, "maxTimeLag": INTEGER, "oldestPendingAt": NULLABLE_STAMP,
                   "limit": INTEGER, "offset": INTEGER})
GROUP_DETAIL = {"type": "object", "additionalProperties": GROUP_QUEUE,
                "propertyNames": SEGMENT, "description": "queue name -> the group on that queue; {} for none"}
GROUP_DELETED = obj({"deleted": BOOLEAN, "consumerGroup": STRING, "cursorsDeleted": INTEGER,
                     "subscriptionsDeleted": INTEGER, "metadataDeleted": BOOLEAN})
BROWSED = obj({"id": STRING, "transactionId": STRING, "traceId": NULLABLE_STRING, "data": ANY,
               "partitionId": STRING, "partition": STRING, "queue": STRING, "createdAt": STAMP,
               "status": {"type": "string", "enum": list(message_admin.STATUSES)}, "consumerGroup": NULLABLE_STRING})
COPIED = obj({"success": BOOLEAN, "messageId": STRING, "transactionId": STRING, "partitionId": STRING,
              "queue": STRING, "partition": STRING})
# Queen's trace, snake_case as Queen answers it
TRACE = obj({"id": STRING, "transaction_id": STRING, "partition_id": STRING, "event_type": STRING, "data": ANY,
             "consumer_group": STRING, "worker_id": NULLABLE_STRING, "created_at": STAMP,
             "queue_name": NULLABLE_STRING, "partition_name": NULLABLE_STRING, "trace_names": array(STRING)})
QUEEN_PAGED = {"total": INTEGER, "pagination": obj({"limit": INTEGER, "offset": INTEGER})}
COUNTERS = obj({key: INTEGER for key in ("pushed", "popped", "acked", "failed", "deadLettered")})
# What retention deleted per queue; evictedMessages: deleted before every reader had consumed them.
RETENTION_TOTALS = obj({"queue": STRING, "deletedSegments": INTEGER, "deletedMessages": INTEGER,
                        "evictedMessages": INTEGER, "deletedPartitions": INTEGER})
STATS_QUEUE = obj({"queue": STRING, "namespace": NULLABLE_STRING, "task": NULLABLE_STRING, "partitions": INTEGER,
                   "totals": COUNTERS, "depth": INTEGER, "lag": INTEGER, "dlqDepth": INTEGER,
                   "refreshedAt": NULLABLE_STAMP})
DATABASE = obj({"id": UUID, "ordinal": NULLABLE_INT, "catalog": BOOLEAN, "healthy": BOOLEAN, "sizeBytes": INTEGER,
                "partitions": INTEGER, "connections": INTEGER, "transactionsCommitted": INTEGER})
POINT = obj({"at": STAMP, "depth": INTEGER, "lag": INTEGER, "dlqDepth": INTEGER,
             **{key: INTEGER for key in ("pushed", "popped", "acked", "failed", "deadLettered")}})
READ_ERROR = {"type": "string", "enum": ["UNKNOWN_TOPIC_OR_PARTITION", "OFFSET_OUT_OF_RANGE"]}
TIME_RANGE = obj({"from": STAMP, "to": STAMP})
PROCESS_FILTER = [query("from", TIMESTAMP, "default: an hour before to"), query("to", TIMESTAMP, "default: now"),
                  query("hostname", {"type": "string", "maxLength": 255}),
                  query("workerId", int_range(0, INT32), "a broker process id")]
GROUPING = obj({"queues": INTEGER, "partitions": INTEGER, "messages": INTEGER, "pending": INTEGER})

# -- operations ---------------------------------------------------------------------------------


def body(schema: dict, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def json_or_binary(schema: dict, layout: str) -> dict:
    """A body that is JSON or queen-mq's binary push body (http/binary_push.py)."""
    out = body(schema)
    out["content"][binary_push.CONTENT_TYPE] = {"schema": {
        "type": "string", "format": "binary", "description": f"{layout} (queen-mq's push_binary.py)"}}
    return out


def op(summary: str, answers: dict[int, dict | None], *, parameters: list | None = None,
       request: dict | None = None, text: str | None = None, binary: str | None = None) -> dict:
    """``answers``: status -> JSON schema (None: no body). Every operation also answers 503
    (database unavailable); one with inputs answers 400, one with a body 413 and 415."""
    answers = dict(answers)
    answers.setdefault(503, ERROR)
    if parameters or request:
        answers.setdefault(400, ERROR)
    if request:
        answers.setdefault(413, ERROR)
        answers.setdefault(415, ERROR)
    if any(p["in"] == "path" for p in parameters or ()):
        # A path parameter holding an encoded '/' (or a dot segment) names another path.
        answers.setdefault(404, ERROR)
        answers.setdefault(405, ERROR)
    out: dict[str, Any] = {"summary": summary, "responses": {}}
    if parameters:
        out["parameters"] = parameters
    if request:
        out["requestBody"] = request
    for status, schema in sorted(answers.items()):
        if status == 200 and text is not None:
            response = {"description": "OK", "content": {text: {"schema": {"type": "string"}}}}
        elif schema is None:
            response = {"description": "no content"}
        else:
            response = {"description": _REASONS.get(status, "answer"),
                        "content": {"application/json": {"schema": schema}}}
            if status == 200 and binary is not None:  # the same answer, binary when asked for
                response["content"][binary] = {"schema": {"type": "string", "format": "binary"}}
        out["responses"][str(status)] = response
    return out


_REASONS = {200: "OK", 201: "created", 204: "nothing to deliver", 400: "bad request (nothing changed)",
            404: "not found", 405: "method not allowed on this path", 409: "conflict",
            413: "too large (nothing changed)", 415: "unsupported Content-Type", 503: "database unavailable"}

OPTION_NOTES = {"ttl": "seconds; a message older than this is skipped by every reader and counted as expired; "
                       "0 = no expiry"}
OPTIONS_IN = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        name: {**({"type": ["boolean", "null"]} if kind is bool
                  else {"type": ["integer", "null"], "minimum": low, "maximum": high}),
               "default": default, **({"description": OPTION_NOTES[name]} if name in OPTION_NOTES else {})}
        for name, (default, kind, low, high) in options._SPEC.items()
    },
}
EXTEND_BODY = {"type": "object", "properties": {"seconds": int_range(1, options.MAX_SECONDS, 60)}}
SEEK_BODY = {"type": "object", "additionalProperties": False, "oneOf": [
    {"properties": {"toEnd": {"const": True}}, "required": ["toEnd"]},
    {"properties": {"timestamp": TIMESTAMP}, "required": ["timestamp"]},
]}
SUBSCRIPTION_BODY = {"type": "object",
                     "anyOf": [{"required": ["subscriptionMode"]}, {"required": ["subscriptionFrom"]}],
                     "properties": {"queue": SEGMENT,
                                    "subscriptionMode": {"type": "string", "enum": ["all", "new", "new-only"]},
                                    "subscriptionFrom": TIMESTAMP}}

CONSOLE_FILE = op("a static file of the web console", {200: None, 404: ERROR},
                  parameters=[path("path", NAME, GREEDY)], text="text/plain; charset=utf-8")
CONSOLE_FILE["responses"]["200"]["content"] = {kind: {"schema": STRING}
                                               for kind in sorted(set(console.CONTENT_TYPES.values()))}

# Liveness asks nothing of the database, so it has no 503.
ALIVE = op("liveness: the broker process answers (the database is not asked)",
           {200: obj({"status": {"const": "ok"}, "engine": {"const": "reginamq"}})})
del ALIVE["responses"]["503"]

OPERATIONS: dict[tuple[str, str], dict] = {
    ("POST", "/api/v1/push"): op(
        "push messages (a queue and partition are created by the first push naming them)",
        {201: {"oneOf": [array(PUSH_RESULT), PUSH_COUNTS]}},
        request=json_or_binary(ref("PushBody"), "QPB1, flags: 1 zstd, 2 answer the counts, 4 transactionIds, "
                                                "8 client-framed messages")),
    ("GET", "/api/v1/pop"): op(
        "pop across the queues of a namespace and/or task", {200: POP, 204: None, 400: POP_ERROR},
        parameters=[query("namespace", NAME), query("task", NAME), *POP_PARAMETERS], binary=FRAMED_POP),
    ("GET", "/api/v1/pop/queue/{queue}"): op(
        "pop from any partition of a queue", {200: POP, 204: None, 400: POP_ERROR},
        parameters=[QUEUE_PATH, *POP_PARAMETERS], binary=FRAMED_POP),
    ("GET", "/api/v1/pop/queue/{queue}/partition/{partition*}"): op(
        "pop from one partition", {200: POP, 204: None, 400: POP_ERROR},
        parameters=[QUEUE_PATH, path("partition", SEGMENT, GREEDY), *POP_PARAMETERS], binary=FRAMED_POP),
    ("POST", "/api/v1/ack"): op("acknowledge one message", {200: array(ACK_RESULT)}, request=body(ref("Ack"))),
    ("POST", "/api/v1/ack/batch"): op("acknowledge many messages", {200: array(ACK_RESULT)},
                                      request=body(ref("AckBatch"))),
    ("POST", "/api/v1/lease/{leaseId}/extend"): op(
        "renew a lease", {200: EXTEND}, parameters=[path("leaseId", UUID)], request=body(EXTEND_BODY, False)),
    ("POST", "/api/v1/transaction"): op("acks and pushes that commit together", {200: TRANSACTION},
                                        request=json_or_binary(ref("TransactionBody"),
                                                               "QTB1: a JSON head, then the pushes as frames")),
    ("POST", "/api/v1/configure"): op("create or change a queue", {200: CONFIGURED},
                                      request=body(ref("ConfigureBody"))),
    ("DELETE", "/api/v1/resources/queues/{queue}"): op(
        "delete a queue and everything in it", {200: obj({"deleted": BOOLEAN, "queue": STRING})},
        parameters=[QUEUE_PATH]),
    ("GET", "/health"): op("readiness: the broker and its database", {200: HEALTH, 503: HEALTH}),
    ("GET", "/status"): ALIVE,
    ("GET", "/openapi.json"): op("this document", {200: {"type": "object"}}),
    ("GET", "/api/v1/dlq"): op(
        "a page of dead letters, newest failures first",
        {200: obj({"messages": array(DLQ_ENTRY), **PAGED})},
        parameters=[query("queue", SEGMENT, required=True), query("consumerGroup", NAME), query("partition", NAME),
                    query("from", TIMESTAMP), query("to", TIMESTAMP), *PAGE]),
    ("POST", "/api/v1/dlq/{id}/replay"): op(
        "push a dead letter again and remove the entry", {200: COPIED, 404: ERROR, 409: ERROR},
        parameters=[path("id", UUID)]),
    ("DELETE", "/api/v1/dlq"): op(
        "purge dead letters", {200: obj({"success": BOOLEAN, "deleted": INTEGER})},
        parameters=[query("queue", SEGMENT, required=True), query("consumerGroup", NAME),
                    query("partition", NAME)]),
    ("GET", "/api/v1/resources/overview"): op(
        "totals", {200: obj({"queues": INTEGER, "partitions": INTEGER, "namespaces": INTEGER, "tasks": INTEGER,
                             "messages": obj({"total": INTEGER, "pending": INTEGER, "inFlight": INTEGER,
                                              "deadLetter": INTEGER}),
                             "consumerGroups": INTEGER, "dlq": INTEGER, "timestamp": STAMP})}),
    ("GET", "/api/v1/resources/queues"): op(
        "a page of queues", {200: obj({"queues": array(QUEUE_ENTRY), **PAGED})},
        parameters=[query("namespace", NAME), query("task", NAME), query("search", NAME), *PAGE]),
    ("GET", "/api/v1/resources/queues/{queue}"): op(
        "one queue with a page of its partitions", {
            200: obj({"name": STRING, "partitionCount": INTEGER, "partitions": array(PARTITION_ENTRY),
                      "groups": array(GROUP_ENTRY), "queueMode": {"anyOf": [GROUP_ENTRY, {"type": "null"}]},
                      "limit": INTEGER, "offset": INTEGER}), 404: ERROR},
        parameters=[QUEUE_PATH, *PAGE]),
    ("GET", "/api/v1/resources/queues/{queue}/depth"): op(
        "pending messages per partition", {
            200: obj({"queue": STRING, "group": NULLABLE_STRING, "pending": INTEGER, "partitionsPending": INTEGER,
                      "conflation": BOOLEAN, "effectivePending": INTEGER,
                      "partitions": array(obj({"partition": STRING, "pending": INTEGER})),
                      "partitionCount": INTEGER, "limit": INTEGER, "offset": INTEGER}), 404: ERROR},
        parameters=[QUEUE_PATH, query("group", NAME), query("consumerGroup", NAME),
                    query("limit", int_range(1, MAX_PAGE, MAX_PAGE)), PAGE[1]]),
    ("GET", "/api/v1/resources/namespaces"): op(
        "per namespace", {200: obj({"namespaces": array({**GROUPING, "properties": {
            **GROUPING["properties"], "namespace": NULLABLE_STRING}}), "total": INTEGER})}),
    ("GET", "/api/v1/resources/tasks"): op(
        "per task", {200: obj({"tasks": array({**GROUPING, "properties": {
            **GROUPING["properties"], "task": NULLABLE_STRING}}), "total": INTEGER})}),
    ("GET", "/api/v1/resources/partitions"): op(
        "a page of partitions", {200: obj({"partitions": array(PARTITION_ENTRY), **PAGED}), 404: ERROR},
        parameters=[query("queue", SEGMENT), query("search", NAME), *PAGE]),
    ("GET", "/api/v1/consumer-groups"): op("one entry per (group, queue)", {200: array(GROUP_ENTRY)}),
    ("GET", "/api/v1/consumer-groups/lagging"): op(
        "groups lagging at least minLagSeconds", {200: array(GROUP_ENTRY)},
        parameters=[query("minLagSeconds", int_range(0, 10 * 365 * 86_400, 60))]),
    ("GET", "/api/v1/consumer-groups/{group}"): op(
        "a group's queues, each with a page of its partitions by name (Queen's shape)", {200: GROUP_DETAIL},
        parameters=[GROUP_PATH, query("queue", SEGMENT),
                    query("limit", int_range(1, MAX_PAGE, MAX_PAGE), "partitions per queue"), PAGE[1]]),
    ("DELETE", "/api/v1/consumer-groups/{group}"): op(
        "delete a group's cursors (and subscriptions)", {200: GROUP_DELETED},
        parameters=[GROUP_PATH, query("deleteMetadata", QUERY_BOOL)]),
    ("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}"): op(
        "delete a group's cursors on one queue", {200: GROUP_DELETED},
        parameters=[GROUP_PATH, QUEUE_PATH, query("deleteMetadata", QUERY_BOOL)]),
    ("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek"): op(
        "move every cursor of the group on the queue", {
            200: obj({"success": BOOLEAN, "consumerGroup": STRING, "queueName": STRING, "seekToEnd": BOOLEAN,
                      "targetTimestamp": NULLABLE_STAMP, "partitionsUpdated": INTEGER, "cursorsCreated": INTEGER}),
            404: ERROR},
        parameters=[GROUP_PATH, QUEUE_PATH], request=body(SEEK_BODY, False)),
    ("POST", "/api/v1/consumer-groups/{group}/subscription"): op(
        "change a group's durable subscription", {
            200: obj({"success": BOOLEAN, "consumerGroup": STRING, "subscriptionMode": STRING,
                      "subscriptionTimestamp": NULLABLE_STAMP, "queues": array(STRING), "updated": INTEGER}),
            404: ERROR},
        parameters=[GROUP_PATH], request=body(SUBSCRIPTION_BODY, False)),
    ("GET", "/api/v1/messages"): op(
        "a page of messages, newest first", {200: obj({"messages": array(BROWSED), **PAGED})},
        parameters=[query("queue", SEGMENT, required=True), query("partition", NAME),
                    query("status", {"type": "string", "enum": list(message_admin.STATUSES)}),
                    query("consumerGroup", NAME), query("from", TIMESTAMP), query("to", TIMESTAMP), *PAGE]),
    ("POST", "/api/v1/messages/{partitionId}/{transactionId}/retry"): op(
        "append a copy of a message to its partition",
        {200: {**COPIED, "properties": {**COPIED["properties"], "removedDeadLetters": INTEGER}}, 404: ERROR},
        parameters=[path("partitionId", UUID), path("transactionId", SEGMENT)]),
    ("GET", "/api/v1/messages/{partitionId}/{transactionId*}"): op(
        "one message", {200: {**BROWSED, "properties": {**BROWSED["properties"],
                                                        "deadLetteredFor": array(NULLABLE_STRING)}}, 404: ERROR},
        parameters=[path("partitionId", UUID), path("transactionId", SEGMENT, GREEDY),
                    query("consumerGroup", NAME)]),
    ("DELETE", "/api/v1/messages/{partitionId}/{transactionId*}"): op(
        "delete a message (a tombstone)", {
            200: obj({"success": BOOLEAN, "deleted": {"type": ["integer", "boolean"]}, "partitionId": STRING,
                      "transactionId": STRING}), 404: ERROR},
        parameters=[path("partitionId", UUID), path("transactionId", SEGMENT, GREEDY)]),
    ("POST", "/api/v1/traces"): op("record a trace event", {201: obj({"success": BOOLEAN, "traceId": UUID,
                                                                      "createdAt": STAMP})},
                                   request=body(ref("TraceBody"))),
    ("GET", "/api/v1/traces/names"): op(
        "trace names", {200: obj({"trace_names": array(obj({"trace_name": STRING, "trace_count": INTEGER,
                                                             "message_count": INTEGER, "last_seen": STAMP})),
                                  **QUEEN_PAGED})},
        parameters=[query("search", NAME), *PAGE]),
    ("GET", "/api/v1/traces/by-name/{name*}"): op(
        "traces by name, newest first", {200: obj({"traces": array(TRACE), **QUEEN_PAGED})},
        parameters=[path("name", SEGMENT, GREEDY), query("from", TIMESTAMP), query("to", TIMESTAMP), *PAGE]),
    ("GET", "/api/v1/traces/{partitionId}/{transactionId*}"): op(
        "a message's timeline, oldest first", {200: obj({"traces": array(TRACE)})},
        parameters=[path("partitionId", UUID), path("transactionId", SEGMENT, GREEDY),
                    query("limit", int_range(1, 10_000, 10_000))]),
    ("GET", "/api/v1/status"): op(
        "totals and throughput", {200: obj({"status": STRING, "queues": INTEGER, "partitions": INTEGER,
                                            "totals": COUNTERS, "depth": INTEGER, "lag": INTEGER,
                                            "dlqDepth": INTEGER, "throughput": {"type": "object"},
                                            "version": STRING, "databases": array(DATABASE)})}),
    ("GET", "/api/v1/status/queues"): op(
        "per-queue counters", {200: obj({"queues": array(STATS_QUEUE), **PAGED})}, parameters=PAGE),
    ("GET", "/api/v1/status/queues/{queue}"): op(
        "one queue's counters and series", {200: {**STATS_QUEUE, "properties": {
            **STATS_QUEUE["properties"], "consumerGroups": array(obj({"consumerGroup": STRING, "backlog": INTEGER})),
            "options": OPTIONS_OUT,
            "series": obj({"intervalSeconds": INTEGER, "points": array(POINT)})}}, 404: ERROR},
        parameters=[QUEUE_PATH]),
    ("GET", "/api/v1/status/analytics"): op(
        "throughput over time", {200: obj({"from": STAMP, "to": STAMP, "intervalSeconds": INTEGER,
                                           "queue": NULLABLE_STRING, "throughput": array(POINT),
                                           "queues": array(obj({"queue": STRING, "points": array(POINT)}))})},
        parameters=[query("queue", SEGMENT), query("from", TIMESTAMP), query("to", TIMESTAMP),
                    query("interval", int_range(10, 86_400, 60), "seconds per point (at most 10,000 points)")]),
    ("POST", "/api/v1/fetch"): op(
        "read partitions by offset (no lease, no cursor)",
        {200: obj({"entries": array(obj({
            "queue": STRING, "partition": STRING, "highWatermark": INTEGER, "logStartOffset": INTEGER,
            "nextOffset": INTEGER, "error": READ_ERROR,
            "records": array(obj({"offset": INTEGER, "transactionId": STRING, "payload": ANY, "ts": STAMP}))},
            required=["queue", "partition", "highWatermark", "logStartOffset", "nextOffset", "records"]))})},
        request=body(ref("FetchBody"))),
    ("POST", "/api/v1/partitions/changed"): op(
        "the partitions of a queue written since a time, a page at a time",
        {200: obj({"safeTime": STAMP, "entries": array(obj({
            "queue": STRING, "next": NULLABLE_STRING, "error": READ_ERROR,
            "partitions": array(obj({"name": STRING, "id": STRING, "lastOffset": INTEGER, "logStart": INTEGER,
                                     "lastWriteAt": NULLABLE_STAMP}))},
            required=["queue", "next", "partitions"]))})},
        request=body(ref("ChangedBody"))),
    ("POST", "/streams/v1/queries"): op(
        "register a streaming query (by name, with its operator chain's hash)",
        {200: obj({"success": BOOLEAN, "query_id": STRING, "name": STRING, "config_hash": STRING,
                   "fresh": BOOLEAN, "reset": BOOLEAN}),
         409: obj({"success": BOOLEAN, "query_id": STRING, "name": STRING, "error": STRING})},
        request=body(ref("Register"))),
    ("POST", "/streams/v1/state/get"): op(
        "a partition's state rows of a streaming query",
        {200: obj({"success": BOOLEAN, "rows": array(obj({"key": STRING, "value": ANY, "updated_at": STAMP}))})},
        request=body(ref("StateGet"))),
    ("POST", "/streams/v1/cycle"): op(
        "commit a streaming cycle: state changes, sink pushes and the source ack, all or nothing",
        {200: obj({"success": BOOLEAN, "query_id": STRING, "partition_id": STRING, "queueName": NULLABLE_STRING,
                   "state_ops_applied": INTEGER, "push_results": array(ANY), "ack_result": ANY,
                   "error": STRING})},
        request=body(ref("Cycle"))),
    ("POST", "/api/v1/kv"): op(
        "key/value operations, applied in one transaction (a lost precondition is a verdict)",
        {200: {"anyOf": [obj({"results": array(KV_RESULT)}), KV_LOST]}},
        request=body(obj({"operations": {**array(KV_OP), "maxItems": kv.MAX_OPS[False]}}, ["operations"]))),
    ("GET", "/api/v1/kv/{ns}/{key*}"): op(
        "one key (ETag: its version, when found); no query string",
        {200: KV_RESULT}, parameters=KV_PATH),
    ("PUT", "/api/v1/kv/{ns}/{key*}"): op(
        "put one key: value, ttlSeconds or forever, expect?, required?",
        {200: KV_ONE}, parameters=KV_PATH,
        request=body(obj({"value": ANY, "ttlSeconds": KV_OP["properties"]["ttlSeconds"], "forever": {"const": True},
                          "expect": KV_OP["properties"]["expect"], "required": BOOLEAN}, ["value"]))),
    ("DELETE", "/api/v1/kv/{ns}/{key*}"): op(
        "delete one key; optional body {expect?, required?}",
        {200: KV_ONE}, parameters=KV_PATH,
        request=body(obj({"expect": KV_OP["properties"]["expect"], "required": BOOLEAN}, []), required=False)),
    ("POST", "/api/v1/locks"): op(
        "acquire, renew, release or look at locks and semaphore permits (each op a verdict)",
        {200: obj({"results": array(obj({"index": INTEGER, "op": STRING, "name": STRING, "acquired": BOOLEAN,
                                         "renewed": BOOLEAN, "released": BOOLEAN, "held": BOOLEAN,
                                         "slot": INTEGER, "token": INTEGER, "owner": STRING, "guard": KV_OP,
                                         "reason": STRING, "holders": array(ANY)}, ["index", "op", "name"]))})},
        request=body(obj({"operations": {**array(LOCK_OP), "maxItems": locks.MAX_OPS}}, ["operations"]))),
    ("POST", "/api/v1/timers"): op(
        "schedule, reschedule or cancel timers (messages pushed when due), in one transaction",
        {200: obj({"results": array(TIMER_RESULT)})},
        request=body(obj({"operations": {**array(TIMER_OP), "maxItems": timers.MAX_OPS[False]}}, ["operations"]))),
    ("GET", "/api/v1/timers/{queue}"): op(
        "a page of a queue's pending timers, in key order",
        {200: obj({"queue": STRING, "rows": array(TIMER_ROW), "truncated": BOOLEAN, "nextAfter": NULLABLE_STRING})},
        parameters=[QUEUE_PATH, query("after", NAME, "exclusive cursor: the last timerKey of the page before"),
                    query("limit", INTEGER, "clamped to 1-1,000 (default 100)")]),
    ("GET", "/api/v1/timers/{queue}/{timerKey*}"): op(
        "one pending timer, its payload in base64",
        {200: obj({"found": BOOLEAN, "queue": STRING, "timerKey": STRING}, ["found", "queue", "timerKey"])},
        parameters=[QUEUE_PATH, path("timerKey", SEGMENT, GREEDY)]),
    ("DELETE", "/api/v1/timers/{queue}/{timerKey*}"): op(
        "cancel one pending timer (absent: not pending, perhaps delivered)",
        {200: TIMER_RESULT}, parameters=[QUEUE_PATH, path("timerKey", SEGMENT, GREEDY), query("txn", NAME)]),
    ("POST", "/api/v1/ephemeral/push"): op(
        "push to an ephemeral queue (one partition, all or nothing)",
        {201: obj({"pushed": INTEGER}), 429: EPH_ERROR},
        request=body(obj({"queue": NAME, "partition": NAME, "messages": {
            **array(obj({"payload": ANY})), "maxItems": ephemeral.MAX_ITEMS}}, ["queue", "messages"]))),
    ("GET", "/api/v1/ephemeral/pop"): op(
        "messages of an ephemeral queue for a consumer group (an empty list when none came)",
        {200: obj({"queue": STRING, "messages": array(obj({"id": STRING, "partition": STRING, "attempts": INTEGER,
                                                            "payload": ANY}))})},
        parameters=[query("queue", NAME, required=True), query("partition", NAME), query("group", NAME),
                    query("batch", int_range(1, ephemeral.MAX_BATCH, 1)), query("wait", QUERY_BOOL),
                    query("timeout", int_range(0, ephemeral.MAX_TIMEOUT_MS, 30_000)), query("autoAck", QUERY_BOOL)]),
    ("POST", "/api/v1/ephemeral/ack"): op(
        "acknowledge ephemeral messages by id: acked, redelivered, stale or unknown",
        {200: obj({"results": array(obj({"id": STRING, "outcome": {
            "type": "string", "enum": ["acked", "redelivered", "stale", "unknown"]}}))})},
        request=body(obj({"queue": NAME, "group": NAME, "acks": {**array(obj({
            "id": STRING, "status": STRING, "error": NULLABLE_STRING}, ["id"])), "maxItems": ephemeral.MAX_ITEMS}},
            ["queue", "acks"]))),
    ("POST", "/api/v1/ephemeral/configure"): op(
        "declare an ephemeral queue and its bounds (durable; the contents are not)",
        {201: obj({"configured": BOOLEAN, "queue": STRING, "tier": STRING, "options": {"type": "object"}})},
        request=body(obj({"queue": NAME, "options": {"anyOf": [EPH_OPTIONS, {"type": "null"}]}}, ["queue"]))),
    ("POST", "/api/v1/ephemeral/reset"): op(
        "drop an ephemeral queue's messages, leases and cursors",
        {200: obj({"queue": STRING, "dropped": INTEGER})}, request=body(obj({"queue": NAME}))),
    ("DELETE", "/api/v1/ephemeral/queue/{queue}"): op(
        "delete an ephemeral queue: contents, cursors and declaration",
        {200: obj({"queue": STRING, "deleted": BOOLEAN, "declared": BOOLEAN})}, parameters=[QUEUE_PATH]),
    ("GET", "/api/v1/ephemeral/queues"): op(
        "every ephemeral queue with its figures",
        {200: obj({"queues": array({"type": "object"}), "count": INTEGER, "cellBytes": INTEGER})}),
    ("GET", "/api/v1/ephemeral/queues/{queue}/depth"): op(
        "an ephemeral queue's figures, by partition and group",
        {200: obj({"queue": STRING, "group": NULLABLE_STRING, "tier": STRING, "pending": INTEGER,
                   "partitionsPending": INTEGER, "bytes": INTEGER, "partitions": array({"type": "object"}),
                   "groups": array({"type": "object"})}),
         404: EPH_ERROR},
        parameters=[QUEUE_PATH, query("group", NAME)]),
    ("GET", "/api/v1/analytics/system-metrics"): op(
        "per-process CPU, memory, database pool and event loop, a point a minute",
        {200: obj({"timeRange": TIME_RANGE, "replicaCount": INTEGER, "replicas": array(obj({
            "hostname": STRING, "port": INTEGER, "workerId": STRING, "timeSeries": array(obj({
                "timestamp": STAMP, "sampleCount": INTEGER, "metrics": {"type": "object"}}))}))})},
        parameters=PROCESS_FILTER),
    ("GET", "/api/v1/analytics/worker-metrics"): op(
        "throughput, pop lag and health of the broker processes over time",
        {200: obj({"timeRange": TIME_RANGE, "bucketMinutes": INTEGER, "pointCount": INTEGER,
                   "timeSeries": array({"type": "object"}), "workers": array({"type": "object"}),
                   "queues": array(obj({"queueName": STRING, "popCount": INTEGER, "avgLagMs": {"type": "number"},
                                        "maxLagMs": {"type": "number"}})),
                   "summary": {"type": "object"}})},
        parameters=PROCESS_FILTER),
    ("POST", "/api/v1/stats/refresh"): op(
        "refresh the stats now", {200: obj({"success": BOOLEAN, "queues": INTEGER, "refreshedAt": STAMP})}),
    ("GET", "/metrics"): op("metrics as JSON", {200: obj({"queues": array(STATS_QUEUE), "groups": array(ANY),
                                                          "retention": array(RETENTION_TOTALS),
                                                          "process": {"type": "object"}, "version": STRING})}),
    ("GET", "/metrics/prometheus"): op("metrics, Prometheus text exposition", {200: None},
                                       text="text/plain; version=0.0.4; charset=utf-8"),
    ("GET", "/"): op("the web console (an HTML page)", {200: None}, text="text/html; charset=utf-8"),
    ("GET", "/console/{path*}"): CONSOLE_FILE,
}

# Struct fields that carry names or ids: the schema says what the handlers accept.
_FIELD_LIMITS = {"queue": SEGMENT, "partition": NAME, "transactionId": NAME, "traceId": NAME,
                 "consumerGroup": NAME, "namespace": NAME, "task": NAME, "eventType": NAME,
                 "partitionId": UUID, "leaseId": UUID}


def _components() -> dict:
    _, schemas = msgspec.json.schema_components(
        [push.PushBody, ack.Ack, ack.AckBatch, transaction.TransactionBody, queues.ConfigureBody,
         traces.TraceBody, reads.FetchBody, reads.ChangedBody, streams.Register,
         streams.StateGet, streams.Cycle], ref_template="#/components/schemas/{name}")
    for schema in schemas.values():
        for name, field in schema.get("properties", {}).items():
            limit = _FIELD_LIMITS.get(name)
            if limit is None:
                continue
            if "anyOf" in field:  # optional: str | None
                field["anyOf"] = [limit if branch.get("type") == "string" else branch for branch in field["anyOf"]]
            elif field.get("type") == "string":
                field.update(limit)
    schemas["PushBody"]["properties"]["items"]["maxItems"] = push.MAX_ITEMS_PER_PUSH
    schemas["AckBatch"]["properties"]["acknowledgments"]["maxItems"] = ack.MAX_ACKS_PER_REQUEST
    for field in ("error",):
        schemas["Ack"]["properties"][field]["anyOf"][0]["maxLength"] = ack.MAX_ERROR_LENGTH
    operations = schemas["TransactionBody"]["properties"]["operations"]
    operations.update(maxItems=transaction.MAX_OPERATIONS)
    schemas["TransactionBody"]["properties"]["kv"] = {"anyOf": [{**array(KV_OP), "maxItems": kv.MAX_OPS[True]},
                                                                 {"type": "null"}]}
    schemas["TransactionBody"]["properties"]["timers"] = {
        "anyOf": [{**array(TIMER_OP), "maxItems": timers.MAX_OPS[True]}, {"type": "null"}]}
    schemas["Operation"]["properties"]["type"] = {"type": "string", "enum": ["ack", "push"]}
    schemas["ConfigureBody"]["properties"]["mode"] = {"type": "string", "enum": ["merge", "replace"],
                                                      "default": "merge"}
    schemas["ConfigureBody"]["properties"]["options"] = {"anyOf": [OPTIONS_IN, {"type": "null"}]}
    schemas["ChangedEntry"]["properties"]["since"] = {"anyOf": [TIMESTAMP, {"type": "null"}]}
    names = schemas["TraceBody"]["properties"]["traceNames"]["anyOf"][0]
    names.update(items=NAME, maxItems=traces.MAX_NAMES, uniqueItems=True)
    return schemas


BEARER = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
          "description": "Only when the broker runs with --auth jwt: a JWT whose role or roles claim grants "
                         "the operation's x-required-role (see docs/security.md)."}


REFUSED = {"401": {"description": "no valid bearer token (auth on)",
                   "content": {"application/json": {"schema": ERROR}}},
           "403": {"description": "the token's roles do not grant this operation (auth on)",
                   "content": {"application/json": {"schema": ERROR}}}}


def access(role: str, operation: dict) -> dict:
    """The operation's security: none for public routes, else a bearer token and the 401/403 answers."""
    if role == PUBLIC:
        return {"security": [], "x-required-role": role}
    return {"security": [{"bearer": []}], "x-required-role": role,
            "responses": dict(sorted({**operation["responses"], **REFUSED}.items()))}


def openapi_path(pattern: str) -> str:
    return re.sub(r"\{(\w+)\*\}", r"{\1}", pattern)


def document(routes: Iterable[tuple[str, str, Any, str]]) -> bytes:
    """The document of ``routes`` ((method, pattern, handler, role) each) as JSON bytes. Raises
    KeyError for a route that has no entry in :data:`OPERATIONS`."""
    paths: dict[str, dict] = {}
    for method, pattern, _handler, role in routes:
        operation = OPERATIONS[(method, pattern)]  # a new route needs a description here
        paths.setdefault(openapi_path(pattern), {})[method.lower()] = {
            "operationId": f"{method.lower()} {pattern}", **operation, **access(role, operation)}
    return orjson.dumps({
        "openapi": "3.1.0",
        "info": {"title": "reginamq", "version": __version__,
                 "description": "Queen MQ's HTTP protocol as served by reginamq (see docs/protocol.md)."},
        "paths": paths,
        "components": {"schemas": _components(), "securitySchemes": {"bearer": BEARER}},
    })

