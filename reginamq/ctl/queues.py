"""``reginamq queue list|show|configure|delete``.

configure sends options as given (a ``--set`` value is read as JSON, else taken as text) and
leaves checking them to the broker, which names the options it knows; merge is the default,
``--replace`` returns the options not given to their defaults. delete asks first unless given
``--yes`` and exits 4 when there was no such queue. Long lists say how many entries were left
out.
"""

from __future__ import annotations

import json

import click

from reginamq.ctl.client import CtlError, CtlGroup, connection_options, nothing_to_do, segment

PAGE = click.IntRange(1, 1000)


@click.group("queue", cls=CtlGroup)
def queue() -> None:
    """Queues: list, show, configure, delete."""


@queue.command("list")
@click.option("--search", default=None, help="Only queues whose name contains this.")
@click.option("--namespace", default=None, help="Only queues of this namespace.")
@click.option("--task", default=None, help="Only queues of this task.")
@click.option("--limit", type=PAGE, default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@connection_options
def list_queues(ctl, search, namespace, task, limit, offset) -> None:
    """List queues with their partitions, messages, pending backlog, groups, dead letters and expired
    messages (skipped by readers for outliving the queue's ttl, summed over readers)."""
    body = ctl.client.get("/api/v1/resources/queues", params={
        "search": search, "namespace": namespace, "task": task, "limit": limit, "offset": offset})
    if ctl.json:
        ctl.out.document(body)
        return
    ctl.out.table(
        ["queue", "namespace", "task", "partitions", "messages", "pending", "groups", "dlq", "expired",
         "last write"],
        [(q["name"], q.get("namespace"), q.get("task"), q.get("partitions"), q.get("messages"), q.get("pending"),
          q.get("consumerGroups"), q.get("dlq"), q.get("expired"), q.get("lastWriteAt")) for q in body["queues"]],
        empty="no queues")
    _paging_note(ctl, len(body["queues"]), body.get("total"), offset)


def _paging_note(ctl, shown: int, total: int | None, offset: int) -> None:
    if total is not None and shown < total:
        ctl.out.note(f"{shown} of {total} shown (from offset {offset}); use --limit/--offset for more")


@queue.command("show")
@click.argument("name")
@click.option("--limit", type=PAGE, default=100, show_default=True, help="Partitions to list.")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@connection_options
def show(ctl, name, limit, offset) -> None:
    """One queue: totals, options, partitions (paged) and the consumer groups reading it."""
    body = ctl.client.get(f"/api/v1/resources/queues/{segment(name)}", params={"limit": limit, "offset": offset})
    if ctl.json:
        ctl.out.document(body)
        return
    out = ctl.out
    out.fields([("queue", body["name"]), ("id", body.get("id")), ("namespace", body.get("namespace")),
                ("task", body.get("task")), ("partitions", body.get("partitionCount")),
                ("messages", body.get("messages")), ("pending", body.get("pending")),
                ("dead letters", body.get("dlq")), ("expired", body.get("expired")),
                ("consumer groups", body.get("consumerGroups")),
                ("last write", body.get("lastWriteAt")), ("created", body.get("createdAt"))])
    options = body.get("options") or {}
    out.table(["option", "value"], sorted(options.items()), title="Options")
    out.table(["partition", "messages", "pending", "cursors", "last offset", "oldest pending", "last write"],
              [(p["name"], p.get("messages"), p.get("pending"), p.get("cursors"), p.get("lastOffset"),
                p.get("oldestPendingAt"), p.get("lastWriteAt")) for p in body.get("partitions", [])],
              title="Partitions")
    _paging_note(ctl, len(body.get("partitions", [])), body.get("partitionCount"), offset)
    groups = list(body.get("groups") or [])
    if body.get("queueMode"):
        groups.insert(0, {**body["queueMode"], "name": "(queue mode)"})
    out.table(["group", "state", "members", "partitions with lag", "lag", "max time lag (s)", "subscription"],
              [(g["name"], g.get("state"), g.get("members"), g.get("partitionsWithLag"), g.get("totalLag"),
                g.get("maxTimeLag"), g.get("subscriptionMode")) for g in groups],
              title="Consumer groups")


def _option_value(text: str):
    """``30`` -> 30, ``true`` -> True, ``null`` -> None (back to the default); else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@queue.command("configure")
@click.argument("name")
@click.option("--set", "-s", "settings", multiple=True, metavar="OPTION=VALUE",
              help="A queue option, e.g. -s leaseTime=30 -s deadLetterQueue=true (VALUE is JSON; "
                   "null returns the option to its default). Repeatable.")
@click.option("--options", "options_json", default=None, metavar="JSON",
              help='Options as one JSON object, e.g. \'{"retryLimit": 2}\'.')
@click.option("--namespace", default=None)
@click.option("--task", default=None)
@click.option("--replace", is_flag=True,
              help="Options not given return to their defaults (default: merge with the stored ones).")
@connection_options
def configure(ctl, name, settings, options_json, namespace, task, replace) -> None:
    """Create a queue or change its options (the broker validates them and lists the known names)."""
    options: dict = {}
    if options_json is not None:
        try:
            options = json.loads(options_json)
        except ValueError as exc:
            raise CtlError(f"--options is not valid JSON: {exc}") from None
        if not isinstance(options, dict):
            raise CtlError("--options must be a JSON object")
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.strip():
            raise CtlError(f"--set wants OPTION=VALUE, got {setting!r}")
        options[key.strip()] = _option_value(value.strip())
    body = {"queue": name, "options": options, "mode": "replace" if replace else "merge"}
    if namespace is not None:
        body["namespace"] = namespace
    if task is not None:
        body["task"] = task
    answer = ctl.client.post("/api/v1/configure", body)
    if ctl.json:
        ctl.out.document(answer)
        return
    ctl.out.fields([("queue", answer.get("queue")), ("id", answer.get("queueId")),
                    ("namespace", answer.get("namespace")), ("task", answer.get("task"))])
    ctl.out.table(["option", "value"], sorted((answer.get("options") or {}).items()), title="Options")


@queue.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@connection_options
def delete(ctl, name, yes) -> None:
    """Delete a queue with all its partitions, messages, cursors and dead letters.

    Exits 4 if there was no such queue.
    """
    if not yes:
        click.confirm(f"Delete queue {name!r} and every message in it?", abort=True, err=True)
    answer = ctl.client.delete(f"/api/v1/resources/queues/{segment(name)}")
    if ctl.json:
        ctl.out.document(answer)
    elif answer.get("deleted"):
        ctl.out.note(f"deleted queue {name!r}")
    if not answer.get("deleted"):
        nothing_to_do(ctl, f"no queue {name!r}: nothing deleted")
