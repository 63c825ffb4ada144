"""The broker as a library against the broker over HTTP, side by side in one run (issue 43).

    python benchmarks/library_vs_http.py [--rates 10000 5000] [--duration 45] [--rounds 2] [--json out.json]

One embedded PostgreSQL in a temporary folder for the whole run. For each rate, ``--rounds``
times, four segments one after another (the first three in an order that turns each round:
``rotated``), each ``reginamq bench``'s load (runner.run) on a fresh queue of the throughput
shape (``--shape throughput``, dedup on by default):

* ``http``: an own ``reginamq serve --workers 1`` on that PostgreSQL, started for the segment
  and stopped after it; broker CPU is its process tree's;
* ``library``: the producers and consumers as tasks of one process over one ``reginamq.Broker``
  (``--transport library``);
* ``library-processes``: a ``reginamq.Broker`` in each producer and consumer process
  (``--library-processes``);
* ``null``: the same producers and consumers in one process calling nothing
  (``--transport null``): the generator's own CPU.

A library segment's broker CPU a message is its processes' CPU a message minus the null
segment's of the same round. PostgreSQL CPU is its server's process tree in every segment.
The table printed at the end is what docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from reginamq.bench import system
from reginamq.bench.broker import OwnBroker
from reginamq.bench.config import SHAPES, BenchConfig
from reginamq.bench.display import Display
from reginamq.bench.report import final_line
from reginamq.bench.runner import Target, run
from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema

SEGMENTS = ("http", "library", "library-processes", "null")


async def segment(kind: str, rate: float, args, pgdata: Path, database_url: str) -> dict:
    cfg = BenchConfig(rate=rate, duration=args.duration, report=args.report, drain=args.drain,
                      **SHAPES["throughput"], transport="http" if kind == "http" else kind.split("-")[0],
                      library_processes=kind == "library-processes")
    postgres = system.postgres_of(str(pgdata))
    broker = None
    if kind == "http":
        broker = OwnBroker(workers=1, data_dir=pgdata)
        broker.start()
        target = Target(url=broker.url, database_url=database_url,
                        broker_finder=partial(system.broker_tree, broker.process.pid), postgres_finder=postgres,
                        description="own broker", cpu_scope="broker = the reginamq serve process tree")
    else:
        target = Target(url=None, database_url=database_url, broker_finder=None, postgres_finder=postgres,
                        description=kind, cpu_scope="broker = in the generator's processes (gen)")
    started = datetime.now(UTC)
    try:
        with Display(cfg.duration + cfg.drain, live=False) as display:
            rows, final = await run(cfg, target, display)
    finally:
        if broker is not None:
            broker.stop()
    print(f"{kind:>18} {rate:>6,.0f} {started:%H:%M:%S}  {final_line(final)}", flush=True)
    return {"kind": kind, "rate": rate, "started": started.isoformat(), "final": final, "intervals": rows,
            "config": cfg.to_dict()}


def per_message(segments: list[dict]) -> list[dict]:
    """Broker, PostgreSQL and machine µs a message of each non-null segment, against the null
    segment of its round."""
    out = []
    for record in segments:
        if record["kind"] == "null":
            continue
        null = next(s for s in segments if s["kind"] == "null" and s["rate"] == record["rate"]
                    and s["round"] == record["round"])
        f, n = record["final"], null["final"]
        rate = f["in_rate"]
        gen_null = n["cpu_gen"] / n["in_rate"] * 1e6
        pg = f["cpu_pg"] / rate * 1e6
        if record["kind"] == "http":
            broker, total = f["cpu_broker"] / rate * 1e6, (f["cpu_broker"] + f["cpu_pg"] + f["cpu_gen"]) / rate * 1e6
        else:
            broker, total = f["cpu_gen"] / rate * 1e6 - gen_null, (f["cpu_gen"] + f["cpu_pg"]) / rate * 1e6
        out.append({"kind": record["kind"], "rate": record["rate"], "round": record["round"],
                    "started": record["started"], "in_rate": rate, "broker_us": broker, "pg_us": pg,
                    "machine_us": total, "gen_null_us": gen_null, "p50_ms": f["p50_ms"], "p99_ms": f["p99_ms"],
                    "shed": f["shed"], "errors": f["push_err"] + f["pop_err"] + f["ack_err"],
                    "accepted": f["accepted"], "popped": f["popped"], "acked": f["acked"],
                    "cpu_wait": f.get("cpu_wait")})
    return out


def table(rows: list[dict]) -> list[str]:
    lines = ["| rate | round | transport | in msg/s | broker µs/msg | PostgreSQL µs/msg | machine µs/msg "
             "| e2e p50 / p99 ms | library / http broker |",
             "|---:|---:|---|---:|---:|---:|---:|---|---:|"]
    for row in rows:
        http = next(r for r in rows if r["kind"] == "http" and r["rate"] == row["rate"] and r["round"] == row["round"])
        ratio = "" if row["kind"] == "http" else f"{row['broker_us'] / http['broker_us']:.2f}"
        lines.append(f"| {row['rate']:,.0f} | {row['round']} | {row['kind']} | {row['in_rate']:,.0f} | "
                     f"{row['broker_us']:.1f} | {row['pg_us']:.1f} | {row['machine_us']:.1f} | "
                     f"{row['p50_ms']:.1f} / {row['p99_ms']:.1f} | {ratio} |")
    return lines


def totals(rows: list[dict]) -> list[str]:
    """Both rounds together: the mean of the per-round figures, and the ratio of the means."""
    lines = []
    for rate in sorted({row["rate"] for row in rows}):
        mean = {}
        for kind in SEGMENTS[:3]:
            mine = [row for row in rows if row["rate"] == rate and row["kind"] == kind]
            mean[kind] = {key: sum(row[key] for row in mine) / len(mine) for key in ("broker_us", "pg_us", "p50_ms",
                                                                                  "p99_ms", "machine_us")}
        for kind in SEGMENTS[:3]:
            m = mean[kind]
            lines.append(f"{rate:>6,.0f} {kind:>18}: broker {m['broker_us']:5.1f} µs/msg, PostgreSQL "
                         f"{m['pg_us']:5.1f}, machine {m['machine_us']:5.1f}, p50/p99 {m['p50_ms']:.1f}/"
                         f"{m['p99_ms']:.1f} ms" + ("" if kind == "http" else
                                                    f", library/http {m['broker_us'] / mean['http']['broker_us']:.2f}"))
    return lines


def rotated(number: int) -> list[str]:
    """The order of round ``number``'s segments: the three measured ones turn by one place each
    round, so that over three rounds none always runs later on a database whose deduplication
    keys have grown; the null segment, which does not touch PostgreSQL, closes every round."""
    measured = list(SEGMENTS[:3])
    shift = (number - 1) % len(measured)
    return [*measured[shift:], *measured[:shift], "null"]


async def main(args) -> None:
    folder = Path(tempfile.mkdtemp(prefix="reginamq-lib43-"))
    server = EmbeddedPostgres(folder / "pgdata")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}, embedded PostgreSQL in {server.data_dir}", flush=True)
    segments: list[dict] = []
    try:
        database_url = server.claim()
        await apply_schema(database_url)
        for rate in args.rates:
            for number in range(1, args.rounds + 1):
                for kind in rotated(number):
                    record = await segment(kind, rate, args, server.data_dir, database_url)
                    record["round"] = number
                    segments.append(record)
                    time.sleep(args.pause)
    finally:
        server.release()
        shutil.rmtree(folder, ignore_errors=True)
    rows = per_message(segments)
    print("\n".join(["", *table(rows), "", *totals(rows)]), flush=True)
    if args.json:
        document = json.dumps({"commit": commit, "args": vars(args) | {"json": str(args.json)}, "rows": rows,
                               "segments": segments}, indent=1, default=str).encode()
        path = Path(args.json)
        with (gzip.open if path.suffix == ".gz" else open)(path, "wb") as out:
            out.write(document)
        print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[10_000, 5_000])
    parser.add_argument("--duration", type=float, default=45)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--report", type=float, default=5)
    parser.add_argument("--drain", type=float, default=10)
    parser.add_argument("--pause", type=float, default=3, help="Seconds between segments.")
    parser.add_argument("--json", default=None, help="Write every segment (.gz: compressed).")
    asyncio.run(main(parser.parse_args()))
