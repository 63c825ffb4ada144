"""``reginamq dlq list|replay|purge``: the dead-letter queue.

Everything goes through the broker's API. ``replay --all`` takes the first page again and
again (a replayed entry leaves the dead-letter queue, so the first page is always the next)
and stops when a page no longer shrinks, so it cannot loop; a failure part way says how many
were replayed before it. replay and purge exit 4 when nothing was replayed or purged.
"""

from __future__ import annotations

import click

from reginamq.ctl.client import CtlError, CtlGroup, connection_options, nothing_to_do, segment

PAGE_MAX = 1000


def filter_options(function):
    options = [
        click.option("--queue", "-q", required=True),
        click.option("--group", "-g", default=None, help="Only dead letters of this consumer group."),
        click.option("--partition", "-p", default=None, help="Only this partition."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group("dlq", cls=CtlGroup)
def dlq() -> None:
    """Dead letters: list, replay, purge."""


@dlq.command("list")
@filter_options
@click.option("--from", "since", default=None, metavar="TIME", help="Failed at or after (ISO-8601).")
@click.option("--to", "until", default=None, metavar="TIME", help="Failed at or before (ISO-8601).")
@click.option("--limit", type=click.IntRange(1, PAGE_MAX), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@connection_options
def list_dlq(ctl, queue, group, partition, since, until, limit, offset) -> None:
    """Dead letters of a queue, newest failure first (an empty list exits 0)."""
    body = ctl.client.get("/api/v1/dlq", params={"queue": queue, "consumerGroup": group, "partition": partition,
                                                 "from": since, "to": until, "limit": limit, "offset": offset})
    if ctl.json:
        ctl.out.document(body)
        return
    messages = body.get("messages", [])
    ctl.out.table(["id", "partition", "group", "transactionId", "retries", "failed at", "error", "data"],
                  [(m["id"], m.get("partition"), m.get("consumerGroup") or "(queue mode)", m.get("transactionId"),
                    m.get("retryCount"), m.get("failedAt"), m.get("errorMessage"), m.get("data"))
                   for m in messages], empty=f"no dead letters on {queue!r}")
    total = body.get("total")
    if total is not None and len(messages) < total:
        ctl.out.note(f"{len(messages)} of {total} shown (from offset {offset}); use --limit/--offset for more")


def _replay_one(ctl, entry_id: str) -> dict | None:
    """The replay answer, or None when there is no such dead letter (any more)."""
    status, body = ctl.client.call("POST", f"/api/v1/dlq/{segment(entry_id)}/replay", allow=(404,))
    return None if status == 404 else body


@dlq.command("replay")
@click.argument("ids", nargs=-1)
@click.option("--queue", "-q", default=None, help="With --all: the queue whose dead letters to replay.")
@click.option("--group", "-g", default=None, help="With --all: only this consumer group's.")
@click.option("--partition", "-p", default=None, help="With --all: only this partition's.")
@click.option("--all", "replay_all", is_flag=True, help="Replay every dead letter of --queue (and filters).")
@connection_options
def replay(ctl, ids, queue, group, partition, replay_all) -> None:
    """Push dead letters back to the end of their partitions (by id, or --all of a queue).

    Exits 4 if none was replayed (unknown ids, or an empty DLQ).
    """
    if replay_all == bool(ids):
        raise CtlError("give dead-letter ids, or --all with --queue")
    if replay_all and not queue:
        raise CtlError("--all needs --queue")
    if not replay_all and (queue or group or partition):
        raise CtlError("--queue/--group/--partition only go with --all")
    replayed: list[dict] = []
    missing: list[str] = []
    try:
        if replay_all:
            while True:  # replayed entries leave the DLQ, so the first page is always the next one
                page = ctl.client.get("/api/v1/dlq", params={
                    "queue": queue, "consumerGroup": group, "partition": partition, "limit": PAGE_MAX,
                    "offset": 0})
                entries = page.get("messages", [])
                if not entries:
                    break
                before = len(replayed)
                for entry in entries:
                    answer = _replay_one(ctl, entry["id"])
                    if answer is not None:
                        replayed.append(answer)
                        if not ctl.json:
                            ctl.out.note(f"replayed {entry['id']} to {answer.get('partition')!r}")
                if len(replayed) == before:
                    break  # the page is not shrinking: do not loop
        else:
            for entry_id in ids:
                answer = _replay_one(ctl, entry_id)
                if answer is None:
                    missing.append(entry_id)
                    ctl.out.note(f"no dead letter {entry_id}")
                else:
                    replayed.append(answer)
                    if not ctl.json:
                        ctl.out.note(f"replayed {entry_id} to {answer.get('queue')!r}/{answer.get('partition')!r}")
    except CtlError as exc:
        if replayed:
            exc.message += f" (stopped; {len(replayed)} dead letter(s) replayed before it)"
        raise
    if ctl.json:
        ctl.out.document({"replayed": replayed, "missing": missing})
    if not replayed:
        nothing_to_do(ctl, "nothing replayed")
    if not ctl.json:
        ctl.out.note(f"{len(replayed)} dead letter(s) replayed")


@dlq.command("purge")
@filter_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@connection_options
def purge(ctl, queue, group, partition, yes) -> None:
    """Delete dead letters of a queue (optionally of one group or partition). Exits 4 if there were none."""
    if not yes:
        click.confirm(f"Delete the dead letters of {queue!r}?", abort=True, err=True)
    answer = ctl.client.delete("/api/v1/dlq", params={"queue": queue, "consumerGroup": group,
                                                      "partition": partition})
    deleted = answer.get("deleted", 0)
    if ctl.json:
        ctl.out.document(answer)
    elif deleted:
        ctl.out.note(f"purged {deleted} dead letter(s) of {queue!r}")
    if not deleted:
        nothing_to_do(ctl, f"no dead letters on {queue!r}: nothing purged")
