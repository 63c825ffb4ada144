"""Spread and cost over 1, 2 and 3 member databases (issue 42; docs/shards.md): the same
``reginamq bench`` shape against ``reginamq serve --shards N`` for each N, one after the other in
one run, so the figures are side by side on the same machine in the same minutes.

For each N it reports the rate the broker accepted, the broker's CPU per message (the bench's
own figure, from its ``--json``), and each member's PostgreSQL CPU per message, sampled here
once a second from the process tree of that member's embedded server (found by its data
folder). A member's share of N members' PostgreSQL work is its CPU per message over the one
member's CPU per message at N = 1.

    python benchmarks/shard_spread.py --rate 3000 --duration 30

With ``--repeat R`` the N values run R times, interleaved (1, 2, 3, 1, 2, 3, ...), so that a
shared machine's load from minute to minute falls on every N alike; it then also prints, for
each N, the median broker CPU per message and its ratio to the median at N = 1, which is the
figure the target of issue 42 (within 15% of one database) is read on.

Everything runs on 127.0.0.1 with embedded PostgreSQL servers in a temporary folder, removed at
the end; the bench starts and stops its own broker for each N.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil

from reginamq.bench.system import CpuMeter, tree
from reginamq.store.embedded import shard_data_dir


def server_of(data_dir: Path):
    """A finder of the process tree of the PostgreSQL server whose postmaster runs on exactly
    ``data_dir`` (``-D data_dir``)."""
    wanted = str(data_dir)

    def finder() -> list[psutil.Process]:
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmdline = proc.info["cmdline"] or []
            if proc.info["name"] in ("postgres", "postmaster") and any(
                    flag == "-D" and value == wanted for flag, value in itertools.pairwise(cmdline)):
                return tree(proc.pid)
        return []

    return finder


def sample_members(data_dirs: list[Path], stop: threading.Event, cores: list[list[float]]) -> None:
    """Each member's PostgreSQL cores, a reading a second, until ``stop``."""
    meters = [CpuMeter(server_of(data_dir)) for data_dir in data_dirs]
    for meter in meters:
        meter.sample()
    while not stop.wait(1.0):
        for readings, meter in zip(cores, meters, strict=True):
            readings.append(meter.sample()[0])


def run(shards: int, root: Path, rate: float, duration: float, workers: int, bench_args: list[str]) -> dict:
    data_dir = root / f"shards{shards}" / "pgdata"
    json_path = root / f"shards{shards}.json"
    command = [sys.executable, "-m", "reginamq", "bench", "--rate", str(rate), "--duration", str(duration),
               "--workers", str(workers), "--data-dir", str(data_dir), "--json", str(json_path), "--drain", "5",
               "--serve-arg=--shards", f"--serve-arg={shards}", *bench_args]
    members = [shard_data_dir(data_dir, shard) for shard in range(shards)]
    cores: list[list[float]] = [[] for _ in members]
    stop = threading.Event()
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = None
    output = []
    for line in bench.stdout:  # the load starts after the broker reports healthy and the header
        output.append(line)
        if sampler is None and line.startswith("[") and "offered=" in line:
            sampler = threading.Thread(target=sample_members, args=(members, stop, cores))
            sampler.start()
    bench.wait()
    stop.set()
    if sampler is not None:
        sampler.join()
    if bench.returncode != 0:
        raise RuntimeError("".join(output[-30:]))
    final = json.loads(json_path.read_text())["final"]
    # the load's seconds: the drain after it idles
    loaded = [readings[:int(duration)] for readings in cores]
    member_cores = [sum(readings) / len(readings) if readings else 0.0 for readings in loaded]
    return {"shards": shards, "in_rate": final["in_rate"], "p99_ms": final["p99_ms"],
            "broker_us": 1e6 * (final["cpu_broker"] or 0.0) / final["in_rate"],
            "member_us": [1e6 * value / final["in_rate"] for value in member_cores],
            "cpu_wait": final.get("cpu_wait")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--repeat", type=int, default=1, help="run the N values this many times, interleaved")
    parser.add_argument("--bench-arg", action="append", default=[],
                        help="passed on to reginamq bench (e.g. --bench-arg=--pop-partitions=4); repeatable")
    args = parser.parse_args()
    results = []
    for _ in range(args.repeat):
        root = Path(tempfile.mkdtemp(prefix="reginamq-shard-spread-"))
        try:
            results += [run(shards, root, args.rate, args.duration, args.workers, args.bench_arg)
                        for shards in args.shards]
        finally:
            shutil.rmtree(root, ignore_errors=True)
    ones = [result["member_us"][0] for result in results if result["shards"] == 1]
    one = statistics.median(ones) if ones else None
    print(f"{'N':>2} {'accepted/s':>11} {'p99 ms':>8} {'broker µs/msg':>14}  PostgreSQL µs/msg per member "
          "(share of one database's)")
    for result in results:
        members = "  ".join(f"{us:6.1f}" + (f" ({us / one:4.0%})" if one else "") for us in result["member_us"])
        wait = "" if result["cpu_wait"] is None else f"  [cpu wait {result['cpu_wait']:.0%}]"
        print(f"{result['shards']:>2} {result['in_rate']:>11,.0f} {result['p99_ms']:>8.1f} "
              f"{result['broker_us']:>14.1f}  {members}{wait}")
    if args.repeat > 1:
        medians = {shards: statistics.median(result["broker_us"] for result in results if result["shards"] == shards)
                   for shards in args.shards}
        print("median broker µs/msg: " + ", ".join(
            f"N = {shards} {us:.1f}" + (f" ({us / medians[1] - 1:+.0%})" if 1 in medians and shards != 1 else "")
            for shards, us in medians.items()))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
