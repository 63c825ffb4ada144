"""What the strict JSON check of a request body costs the broker's Python, per request.

Times, in this process, the strict JSON check (reginamq/common/jsonlimits.py) of a push body
as ``reginamq bench`` builds it (100 messages of 256 bytes; UUIDv4 transactionIds) and of an
ack body of 170 acknowledgements (one pop's). Best of ``--rounds``.

    PYTHONPATH=<checkout> python benchmarks/request_bodies.py

Run it from outside the checkout with ``PYTHONPATH`` choosing the code, alternating checkouts.
"""

from __future__ import annotations

import argparse
import time
import timeit
import uuid

import orjson

from reginamq.bench.config import BenchConfig
from reginamq.bench.load import build_push_body
from reginamq.common import jsonlimits


def ack_body(acks: int) -> bytes:
    partition, lease = str(uuid.uuid4()), str(uuid.uuid4())
    return orjson.dumps({"acknowledgments": [{"transactionId": str(uuid.uuid4()), "partitionId": partition,
                                              "leaseId": lease, "status": "completed"} for _ in range(acks)]})


def best_us(work, rounds: int, calls: int) -> float:
    return min(timeit.repeat(work, number=calls, repeat=rounds)) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    config = BenchConfig(rate=40_000, queue="bench-q", transaction_ids="uuid4")
    push = build_push_body(config, 0, 0, [0] * config.partitions, time.time_ns(), 0)
    acks = ack_body(170)
    rounds, calls = args.rounds, args.calls
    print(f"check of a push body ({len(push):,} B): {best_us(lambda: jsonlimits.check(push), rounds, calls):.1f} µs")
    print(f"check of an ack body ({len(acks):,} B): {best_us(lambda: jsonlimits.check(acks), rounds, calls):.1f} µs")


if __name__ == "__main__":
    main()
