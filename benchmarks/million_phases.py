"""Phases of a million-partition run, and its ratio to the 200-partition reference.

Issue 6 judges the completed space's p99 against the same shape on 200 partitions measured the
same day. A p99 over a phase is the median of its 10-second intervals' p99s, so that one slow
interval of this shared machine does not decide the phase; the reference is judged only after
its warm-up (until completed retention starts deleting, it does less work than the run it is
set beside).

    python benchmarks/million_phases.py million.json [--reference reference.json --warmup 90]

The phases' bounds come from the run's own configuration (how long its --active window took
to move over the space).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from reginamq.bench.config import BenchConfig


def load(path: Path) -> tuple[BenchConfig, list[dict]]:
    """A `reginamq bench --json` series: its configuration and its load-phase intervals (drain
    intervals left out)."""
    document = json.loads(path.read_text())
    return BenchConfig(**document["config"]), [row for row in document["intervals"] if row["phase"] == "load"]


def summarise(name: str, rows: list[dict]) -> dict:
    """One table row: the phase's intervals, shed, median p50/p99, worst p99, cores, RSS, size."""
    return {
        "phase": name,
        "intervals": len(rows),
        "shed": sum(row["interval"]["shed"] for row in rows),
        "errors": sum(row["interval"][key] for row in rows for key in ("push_err", "pop_err", "ack_err")),
        "p50": statistics.median(row["p50_ms"] for row in rows),
        "p99": statistics.median(row["p99_ms"] for row in rows),
        "worst_p99": max(row["p99_ms"] for row in rows),
        "broker_cores": statistics.fmean(row["cpu_broker"] for row in rows),
        "pg_cores": statistics.fmean(row["cpu_pg"] for row in rows),
        "gen_cores": statistics.fmean(row["cpu_gen"] for row in rows),
        "rss": (min(row["broker_rss_mb"] for row in rows), max(row["broker_rss_mb"] for row in rows)),
        "db": (rows[0]["db_mb"], rows[-1]["db_mb"]),
    }


def between(rows: list[dict], start: float, end: float) -> list[dict]:
    """Intervals that ended after `start` and no later than `end` seconds into the run."""
    return [row for row in rows if start < row["t"] <= end + 0.5]


def growth(rows: list[dict], space: int, first: float, cover: float, last_seconds: float = 240.0) -> str:
    """The two growth bounds of issue 6: broker RSS per partition created between the end of the
    opening phase (the first interval, when the opening phase is all of creation) and the end of
    creation (the space is created at a steady pace), and the database size over the last
    minutes of the completed space."""
    at_first = between(rows, 0, first)[-1] if first < cover else rows[0]
    at_cover = between(rows, 0, cover)[-1]
    created = space * (at_cover["t"] - at_first["t"]) / cover
    rss_bytes = (at_cover["broker_rss_mb"] - at_first["broker_rss_mb"]) * 1e6
    end = rows[-1]["t"]
    last_seconds = min(last_seconds, end - cover)  # a small run's completed space is shorter
    tail = between(rows, end - last_seconds, end)
    start_mb, end_mb = tail[0]["db_mb"], tail[-1]["db_mb"]
    change = (end_mb - start_mb) / start_mb * 100
    return (f"broker RSS {at_first['broker_rss_mb']:.1f} MB at {at_first['t']:.0f} s, "
            f"{at_cover['broker_rss_mb']:.1f} MB at {at_cover['t']:.0f} s: {rss_bytes / created:.0f} bytes "
            f"a partition created in between (issue 6: at most 100); database {start_mb:.1f} -> {end_mb:.1f} MB "
            f"over the last {last_seconds:.0f} s ({change:+.2f}%, issue 6: flat within 2%)")


def print_table(phases: list[dict]) -> None:
    print("| phase | intervals | shed | errors | p50 / p99 (median of 10 s intervals) | worst interval p99 "
          "| broker + PG (+ generator) cores | broker RSS | database |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in phases:
        print(f"| {p['phase']} | {p['intervals']} | {p['shed']:,} | {p['errors']:,} "
              f"| {p['p50']:.0f} / **{p['p99']:.0f} ms** | {p['worst_p99']:,.0f} ms "
              f"| {p['broker_cores']:.2f} + {p['pg_cores']:.2f} (+ {p['gen_cores']:.2f}) "
              f"| {p['rss'][0]:.0f}–{p['rss'][1]:.0f} MB | {p['db'][0]:.0f} → {p['db'][1]:.0f} MB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("million", type=Path, help="the million run's --json series")
    parser.add_argument("--first", type=float, default=300.0, help="the opening phase, seconds")
    parser.add_argument("--reference", type=Path, help="the 200-partition reference's --json series")
    parser.add_argument("--warmup", type=float, default=90.0, help="reference seconds left out at its start")
    args = parser.parse_args()

    config, rows = load(args.million)
    end, cover = rows[-1]["t"], config.cover_seconds
    first = min(args.first, cover)  # a small run may cover its space sooner
    spans = [(f"first {first:.0f} s", 0, first),
             (f"creating ({first:.0f}–{cover:.0f} s)", first, cover),
             (f"completed space ({cover:.0f}–{end:.0f} s)", cover, end)]
    phases = [summarise(name, between(rows, start, stop)) for name, start, stop in spans if stop > start]
    if args.reference:
        _, reference_rows = load(args.reference)
        reference_end = reference_rows[-1]["t"]
        phases.append(summarise(f"200 partitions ({args.warmup:.0f}–{reference_end:.0f} s)",
                                between(reference_rows, args.warmup, reference_end)))
    print_table(phases)
    print()
    print(growth(rows, config.space, first, cover))
    if args.reference:
        completed, reference = phases[-2], phases[-1]
        print(f"\ncompleted-space p99 / reference p99 = {completed['p99']:.0f} / {reference['p99']:.0f} ms"
              f" = {completed['p99'] / reference['p99']:.2f}x (issue 6 asks for at most 1.5x)")


if __name__ == "__main__":
    main()
