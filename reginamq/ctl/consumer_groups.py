"""``reginamq group list|lag|seek|delete``: consumer groups, their lag, and moving their cursors.

Queue mode is shown as the group ``__QUEUE_MODE__``, the name the broker answers with. seek
and delete change cursors on the broker and exit 4 when there was nothing to move or delete;
delete asks first unless given ``--yes``.
"""

from __future__ import annotations

import click

from reginamq.ctl.client import CtlError, CtlGroup, connection_options, nothing_to_do, segment

SUMMARY_COLUMNS = ["group", "queue", "state", "members", "partitions", "partitions with lag", "lag",
                   "max time lag (s)", "subscription"]


def _subscription(entry: dict) -> str | None:
    """Where the group started, and its delivery policy when it conflates (last value only)."""
    mode = entry.get("subscriptionMode")
    return f"{mode or '-'}, last value" if entry.get("conflation") else mode


def _summary_rows(entries: list[dict]) -> list[tuple]:
    return [(g["name"], g.get("queueName"), g.get("state"), g.get("members"), g.get("partitions"),
             g.get("partitionsWithLag"), g.get("totalLag"), g.get("maxTimeLag"), _subscription(g))
            for g in entries]


@click.group("group", cls=CtlGroup)
def group() -> None:
    """Consumer groups: list, lag, seek, delete (queue mode is named __QUEUE_MODE__)."""


@group.command("list")
@click.option("--queue", "-q", default=None, help="Only groups reading this queue.")
@connection_options
def list_groups(ctl, queue) -> None:
    """One line per (group, queue): members, lag in messages and seconds, state."""
    entries = ctl.client.get("/api/v1/consumer-groups")
    if queue is not None:
        entries = [g for g in entries if g.get("queueName") == queue]
    if ctl.json:
        ctl.out.document(entries)
        return
    ctl.out.table(SUMMARY_COLUMNS, _summary_rows(entries), empty="no consumer groups")


@group.command("lag")
@click.argument("name", required=False)
@click.option("--queue", "-q", default=None, help="Only this queue.")
@click.option("--min-lag-seconds", type=click.IntRange(0), default=0, show_default=True,
              help="Without NAME: groups whose oldest unconsumed message is at least this old.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="With NAME: partitions to list per queue.")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@connection_options
def lag(ctl, name, queue, min_lag_seconds, limit, offset) -> None:
    """Lag: without NAME the groups that are behind; with NAME that group per partition."""
    if name is None:
        entries = ctl.client.get("/api/v1/consumer-groups/lagging", params={"minLagSeconds": min_lag_seconds})
        if queue is not None:
            entries = [g for g in entries if g.get("queueName") == queue]
        if ctl.json:
            ctl.out.document(entries)
        else:
            ctl.out.table(SUMMARY_COLUMNS, _summary_rows(entries), empty="no group is behind")
        return
    body = ctl.client.get(f"/api/v1/consumer-groups/{segment(name)}",
                          params={"queue": queue, "limit": limit, "offset": offset})
    if not body:
        where = f" on queue {queue!r}" if queue else ""
        raise CtlError(f"consumer group {name!r} does not read any queue{where}")
    if ctl.json:
        ctl.out.document(body)
        return
    ctl.out.table(SUMMARY_COLUMNS, [
        (name, queue_name, q.get("state"), q.get("members"), q.get("partitionCount"), q.get("partitionsWithLag"),
         q.get("totalLag"), q.get("maxTimeLag"), _subscription(q)) for queue_name, q in body.items()],
        title=f"Group {name}")
    ctl.out.table(
        ["queue", "partition", "position", "last offset", "lag", "time lag (s)", "oldest pending", "lease until"],
        [(queue_name, p.get("partition"), p.get("position"), p.get("lastOffset"), p.get("offsetLag"),
          p.get("timeLagSeconds"), p.get("oldestPendingAt"), p.get("leaseExpiresAt"))
         for queue_name, q in body.items() for p in q.get("partitions", [])],
        title="Partitions")
    for queue_name, q in body.items():
        shown, total = len(q.get("partitions", [])), q.get("partitionCount")
        if total is not None and shown < total:
            ctl.out.note(f"{queue_name}: {shown} of {total} partitions shown (from offset {offset}); "
                         "use --limit/--offset for more")


@group.command("seek")
@click.argument("name")
@click.option("--queue", "-q", required=True)
@click.option("--to-end", is_flag=True, help="Skip everything pushed so far.")
@click.option("--to", "timestamp", default=None, metavar="TIME",
              help="Re-read (or skip to) messages pushed from this ISO-8601 time (UTC without a zone) or 'now'.")
@connection_options
def seek(ctl, name, queue, to_end, timestamp) -> None:
    """Move every cursor of group NAME on a queue to its end or to a time. Exits 4 if the queue has no partitions."""
    if to_end == (timestamp is not None):
        raise CtlError("give exactly one of --to-end or --to TIME")
    body = {"toEnd": True} if to_end else {"timestamp": timestamp}
    answer = ctl.client.post(f"/api/v1/consumer-groups/{segment(name)}/queues/{segment(queue)}/seek", body)
    if ctl.json:
        ctl.out.document(answer)
    else:
        target = "the end" if to_end else answer.get("targetTimestamp")
        ctl.out.note(f"group {name!r} on {queue!r}: {answer.get('partitionsUpdated', 0)} partition(s) moved to "
                     f"{target} ({answer.get('cursorsCreated', 0)} cursor(s) created)")
    if not answer.get("partitionsUpdated"):
        nothing_to_do(ctl)


@group.command("delete")
@click.argument("name")
@click.option("--queue", "-q", default=None, help="Only the group's cursors on this queue.")
@click.option("--keep-metadata", is_flag=True, help="Keep the group's subscriptions (where new partitions start).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@connection_options
def delete(ctl, name, queue, keep_metadata, yes) -> None:
    """Delete a consumer group's cursors (and subscriptions): it reads from its subscription start again.

    Exits 4 if the group had nothing to delete.
    """
    where = f" on {queue!r}" if queue else ""
    if not yes:
        click.confirm(f"Delete consumer group {name!r}{where}?", abort=True, err=True)
    path = f"/api/v1/consumer-groups/{segment(name)}"
    if queue is not None:
        path += f"/queues/{segment(queue)}"
    answer = ctl.client.delete(path, params={"deleteMetadata": not keep_metadata})
    if ctl.json:
        ctl.out.document(answer)
    elif answer.get("deleted"):
        ctl.out.note(f"deleted group {name!r}{where}: {answer.get('cursorsDeleted', 0)} cursor(s), "
                     f"{answer.get('subscriptionsDeleted', 0)} subscription(s)")
    if not answer.get("deleted"):
        nothing_to_do(ctl, f"no consumer group {name!r}{where}: nothing deleted")
