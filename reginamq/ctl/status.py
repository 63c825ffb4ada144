"""``reginamq status``: is the broker up, and what is in it.

Exits 2 when the broker cannot be reached or answers that its database is down, so a script
can use it as a health check; with ``--json`` the health answer is printed even then.
"""

from __future__ import annotations

import click

from reginamq.ctl.client import SERVER_ERROR, CtlCommand, CtlError, connection_options


@click.command("status", cls=CtlCommand)
@click.option("--queues/--no-queues", "with_queues", default=True, show_default=True,
              help="Also list per-queue counters and throughput.")
@connection_options
def status(ctl, with_queues) -> None:
    """Health, totals, throughput, the databases and per-queue counters. Exits 2 if the broker is down or unhealthy."""
    code, health = ctl.client.call("GET", "/health", allow=(503,))
    if code == 503:
        if ctl.json:
            ctl.out.document({"url": ctl.url, "health": health})
        raise CtlError(f"the broker at {ctl.url} is unhealthy: database {(health or {}).get('database')}",
                       SERVER_ERROR, 503)
    body = ctl.client.get("/api/v1/status")
    queues = ctl.client.get("/api/v1/status/queues", params={"limit": 1000}) if with_queues else None
    if ctl.json:
        document = {"url": ctl.url, "health": health, "status": body}
        if queues is not None:
            document["queues"] = queues
        ctl.out.document(document)
        return
    totals, throughput = body.get("totals") or {}, body.get("throughput") or {}
    rates = ", ".join(f"{key.removesuffix('PerSecond')} {value:g}/s" for key, value in throughput.items()
                      if key.endswith("PerSecond"))
    ctl.out.fields([
        ("broker", ctl.url), ("health", f"{health.get('status')} (database {health.get('database')})"),
        ("version", body.get("version") or health.get("version")), ("uptime (s)", body.get("uptimeSeconds")),
        ("queues", body.get("queues")), ("partitions", body.get("partitions")),
        ("depth", body.get("depth")), ("largest lag", body.get("lag")), ("dead letters", body.get("dlqDepth")),
        ("pushed / popped / acked", f"{totals.get('pushed', 0)} / {totals.get('popped', 0)} / "
                                    f"{totals.get('acked', 0)}"),
        ("failed / dead-lettered", f"{totals.get('failed', 0)} / {totals.get('deadLettered', 0)}"),
        (f"throughput (last {throughput.get('windowSeconds', '?')} s)", rates or "-"),
        ("stats refreshed", body.get("statsRefreshedAt")),
    ], title="reginamq")
    ctl.out.table(["database", "ordinal", "healthy", "size (MB)", "partitions", "connections", "commits"],
                  [(d.get("id"), d.get("ordinal"), d.get("healthy"), round((d.get("sizeBytes") or 0) / 1e6, 1),
                    d.get("partitions"), d.get("connections"), d.get("transactionsCommitted"))
                   for d in body.get("databases", [])], title="Databases", empty="no database")
    if queues is not None:
        rows = []
        for q in queues.get("queues", []):
            t = q.get("totals") or {}
            rows.append((q.get("queue"), q.get("partitions"), q.get("depth"), q.get("lag"), q.get("dlqDepth"),
                         t.get("pushed"), t.get("popped"), t.get("acked"), t.get("failed"), t.get("deadLettered")))
        ctl.out.table(["queue", "partitions", "depth", "lag", "dlq", "pushed", "popped", "acked", "failed",
                       "dead-lettered"], rows, title="Queues", empty="no queues")
