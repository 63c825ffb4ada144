"""``reginamq push``, ``reginamq pop`` and ``reginamq tail``: the message plane from a shell.

push reads NDJSON: one JSON value per line (blank lines are skipped). In the default ``auto``
format a line that is an object with a ``payload`` key and no keys but ``payload``,
``partition``, ``transactionId`` and ``traceId`` is an *envelope*; any other line is the payload
itself. ``--format payload`` / ``--format envelope`` force one reading. The partition of a message
is, first that wins: the envelope's ``partition``, the payload field named by ``--partition-key``,
``--partition``, the broker's ``Default``; a payload without the ``--partition-key`` field is an
error unless ``--partition`` is given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import click

from reginamq.ctl.client import (
    USER_ERROR,
    CtlCommand,
    CtlError,
    connection_options,
    nothing_to_do,
    segment,
)

ENVELOPE_KEYS = frozenset({"payload", "partition", "transactionId", "traceId"})
MAX_BATCH = 10_000


# --- push --------------------------------------------------------------------------------------

def _field(payload: Any, path: str) -> Any:
    """``a.b`` looks up payload["a"]["b"]; a key that itself holds dots is tried first."""
    if isinstance(payload, dict) and path in payload:
        return payload[path]
    value = payload
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _item(number: int, text: str, queue: str, fmt: str, partition: str | None,
          partition_key: str | None) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CtlError(f"line {number}: not JSON ({exc})") from None
    envelope = fmt == "envelope" or (
        fmt == "auto" and isinstance(value, dict) and "payload" in value and set(value) <= ENVELOPE_KEYS)
    item: dict[str, Any] = {"queue": queue}
    if envelope:
        if not isinstance(value, dict) or "payload" not in value:
            raise CtlError(f'line {number}: an envelope must be an object with a "payload" key')
        unknown = set(value) - ENVELOPE_KEYS
        if unknown:
            raise CtlError(f"line {number}: unknown envelope key(s): {', '.join(sorted(unknown))}")
        item["payload"] = value["payload"]
        for key in ("partition", "transactionId", "traceId"):
            if value.get(key) is not None:
                if not isinstance(value[key], str):
                    raise CtlError(f"line {number}: {key} must be a string")
                item[key] = value[key]
    else:
        item["payload"] = value
    if "partition" not in item and partition_key is not None:
        key_value = _field(item["payload"], partition_key)
        if isinstance(key_value, str | int | float) and not isinstance(key_value, bool):
            item["partition"] = str(key_value)
        elif partition is None:
            raise CtlError(f"line {number}: the payload has no string or number field {partition_key!r} "
                           "for --partition-key (give --partition for such payloads)")
    if "partition" not in item and partition is not None:
        item["partition"] = partition
    return item


def _batches(stream, size: int, build) -> Iterator[list[tuple[int, dict]]]:
    batch: list[tuple[int, dict]] = []
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        batch.append((number, build(number, line)))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


@click.command("push", cls=CtlCommand)
@click.option("--queue", "-q", required=True, help="The queue (created by the first push if new).")
@click.option("--partition", "-p", default=None,
              help="Partition of every message [default: Default]; with --partition-key, of payloads "
                   "without that field.")
@click.option("--partition-key", default=None, metavar="FIELD",
              help="Take each message's partition from this payload field (a.b for nested fields).")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH), default=100, show_default=True,
              help="Messages per push request.")
@click.option("--format", "fmt", type=click.Choice(["auto", "payload", "envelope"]), default="auto",
              show_default=True, help="How to read a line (see above).")
@click.option("--input", "-i", "stream", type=click.File("r", encoding="utf-8"), default="-",
              help="Read this file instead of stdin.")
@connection_options
def push(ctl, queue, partition, partition_key, batch, fmt, stream) -> None:
    """Push NDJSON from stdin: one message per line, in batches of --batch per request.

    \b
    A line is either the payload itself or an envelope
      {"payload": ..., "partition": "p", "transactionId": "t", "traceId": "x"}
    (--format auto takes an object as an envelope when it has a "payload" key and only
    envelope keys). Batches are sent as lines are read: a bad line stops the push with
    exit code 1 and the lines before it stay pushed. An empty input exits 4.

    Prints a summary, or with --json one JSON line per message:
    {"line", "queue", "partition", "transactionId", "messageId", "status"}.
    """
    counts: dict[str, int] = {}
    pushed = requests = 0

    def build(number: int, line: str) -> dict:
        return _item(number, line, queue, fmt, partition, partition_key)

    try:
        for chunk in _batches(stream, batch, build):
            answer = ctl.client.post("/api/v1/push", {"items": [item for _, item in chunk]})
            requests += 1
            for (number, item), result in zip(chunk, answer, strict=False):
                status = result.get("status", "?")
                counts[status] = counts.get(status, 0) + 1
                if ctl.json:
                    ctl.out.line({"line": number, "queue": result.get("queueName", queue),
                                  "partition": item.get("partition", "Default"),
                                  "transactionId": result.get("transaction_id"),
                                  "messageId": result.get("message_id"), "status": status})
            pushed += len(chunk)
    except CtlError as exc:
        if pushed:
            exc.message += f" (stopped; the {pushed} message(s) before it were pushed)"
        raise
    if pushed == 0:
        nothing_to_do(ctl, "nothing to push: the input had no lines")
    if not ctl.json:
        detail = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        ctl.out.note(f"pushed {pushed} message(s) to {queue!r} in {requests} request(s): {detail}")


# --- pop and tail ------------------------------------------------------------------------------

def _pop_path(queue: str, partition: str | None) -> str:
    path = f"/api/v1/pop/queue/{segment(queue)}"
    return path if partition is None else f"{path}/partition/{segment(partition)}"


def _pop(ctl, queue: str, partition: str | None, group: str | None, batch: int, partitions: int,
         wait_seconds: float, lease_seconds: int | None, subscription_mode: str | None) -> list[dict]:
    params = {"batch": batch, "partitions": partitions, "consumerGroup": group, "autoAck": False,
              "wait": wait_seconds > 0, "timeout": int(wait_seconds * 1000),
              "leaseSeconds": lease_seconds, "subscriptionMode": subscription_mode}
    status, body = ctl.client.call("GET", _pop_path(queue, partition), params=params,
                                   timeout=wait_seconds + ctl.client.timeout if wait_seconds > 0 else None)
    if status == 204 or not body:
        return []
    return body.get("messages") or []


def _ack(ctl, messages: list[dict], group: str | None, status: str = "completed") -> None:
    if not messages:
        return
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m.get("leaseId"),
             "status": status} for m in messages]
    body: dict[str, Any] = {"acknowledgments": acks}
    if group is not None:
        body["consumerGroup"] = group
    answer = ctl.client.post("/api/v1/ack/batch", body)
    rejected = [r for r in answer or [] if not r.get("success")]
    if rejected:
        first = rejected[0]
        raise CtlError(f"{len(rejected)} of {len(acks)} ack(s) rejected, e.g. {first.get('transactionId')}: "
                       f"{first.get('error')} (the messages will be delivered again)", USER_ERROR)


def _show(ctl, message: dict, data_only: bool) -> None:
    ctl.out.line(message.get("data") if data_only else message)


def consumer_options(subscription_help: str):
    """The options pop and tail share; each says where a new group starts by default."""
    options = [
        click.option("--queue", "-q", required=True),
        click.option("--partition", "-p", default=None, help="Only this partition [default: any]."),
        click.option("--partitions", type=click.IntRange(1, 1000), default=1, show_default=True,
                     help="Partitions one pop may claim."),
        click.option("--lease-seconds", type=click.IntRange(1), default=None,
                     help="Lease of a pop [default: the queue's leaseTime]."),
        click.option("--subscription-mode", type=click.Choice(["all", "new", "new-only"]), default=None,
                     help=subscription_help),
        click.option("--data-only", is_flag=True, help="Print only each message's payload."),
    ]

    def decorate(function):
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


@click.command("pop", cls=CtlCommand)
@consumer_options("Where a group new to the queue starts reading: all = the backlog, new = messages pushed "
                  "from its first pop on [default: the broker's, new unless it was started with "
                  "--default-subscription-mode all].")
@click.option("--group", "-g", default=None, help="Consumer group [default: queue mode].")
@click.option("--batch", "-n", type=click.IntRange(1, MAX_BATCH), default=1, show_default=True,
              help="Messages to pop.")
@click.option("--ack/--no-ack", default=True, show_default=True,
              help="Acknowledge the messages after printing them (--no-ack leaves them leased: "
                   "they come back when the lease expires; their leaseId is printed).")
@click.option("--wait", "wait_seconds", type=click.FloatRange(0, 3600), default=0, show_default=True,
              metavar="SECONDS", help="Long-poll this long for messages.")
@connection_options
def pop(ctl, queue, partition, partitions, lease_seconds, subscription_mode, data_only, group, batch, ack,
        wait_seconds) -> None:
    """Pop messages once and print each as a JSON line; exit 4 if there were none."""
    messages = _pop(ctl, queue, partition, group, batch, partitions, wait_seconds, lease_seconds,
                    subscription_mode)
    if not messages:
        nothing_to_do(ctl, f"no message available on {queue!r}")
    for message in messages:
        _show(ctl, message, data_only)
    if ack:
        _ack(ctl, messages, group)


@click.command("tail", cls=CtlCommand)
@consumer_options("Where a group new to the queue starts reading: all = the backlog, new = messages pushed "
                  "from its first pop on [default: new with -f, which follows new messages as Queen's tail "
                  "does; all without -f, which prints what is there]. A group that has read the queue "
                  "before continues where it stopped.")
@click.option("--group", "-g", default="reginamq-tail", show_default=True,
              help="The consumer group that follows the queue (durable: a second tail continues "
                   "where the first stopped; two tails of one group share the messages).")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new messages (long polls) until Ctrl-C.")
@click.option("--batch", "-n", type=click.IntRange(1, MAX_BATCH), default=100, show_default=True,
              help="Messages per pop.")
@click.option("--poll-seconds", type=click.FloatRange(0.1, 3600), default=30, show_default=True,
              help="Length of one long poll with --follow.")
@click.option("--max-messages", type=click.IntRange(1), default=None,
              help="Stop after printing this many messages.")
@click.option("--duration", type=click.FloatRange(0, min_open=True), default=None, metavar="SECONDS",
              help="Stop after this many seconds.")
@connection_options
def tail(ctl, queue, partition, partitions, lease_seconds, subscription_mode, data_only, group, follow, batch,
         poll_seconds, max_messages, duration) -> None:
    """Print a queue's messages as a consumer group reads them, one JSON line each, acking after printing.

    Without -f it prints what is there (a new group starts at the beginning of the queue) and stops
    once the group has read everything available; with -f it follows the queue (a new group starts
    with the messages pushed from then on) until Ctrl-C, --max-messages or --duration. Ctrl-C
    stops cleanly: printed messages are acked, popped but unprinted ones are handed back at once
    (retry, no retry charged). Exits 4 if no message was printed.
    """
    if subscription_mode is None:
        subscription_mode = "new" if follow else "all"
    deadline = None if duration is None else time.monotonic() + duration
    printed_total = 0
    current: list[dict] = []
    printed = 0
    try:
        while max_messages is None or printed_total < max_messages:
            wait = 0.0
            if follow:
                wait = poll_seconds
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        break
            elif deadline is not None and time.monotonic() >= deadline:
                break
            size = batch if max_messages is None else min(batch, max_messages - printed_total)
            current, printed = _pop(ctl, queue, partition, group, size, partitions, wait, lease_seconds,
                                    subscription_mode), 0
            if not current:
                if not follow:
                    break
                continue
            for message in current:
                _show(ctl, message, data_only)
                printed += 1
                printed_total += 1
            _ack(ctl, current, group)
            current = []
    except KeyboardInterrupt:
        try:
            _ack(ctl, current[:printed], group)
            _ack(ctl, current[printed:], group, status="retry")
        except (CtlError, KeyboardInterrupt):
            pass  # the leases expire on their own
        ctl.out.note(f"stopped after {printed_total} message(s)")
    if printed_total == 0:
        nothing_to_do(ctl, f"no message for group {group!r} on {queue!r}")
