"""What the strict JSON check (reginamq/http/jsonlimits.py) costs a request body, in µs.

    python benchmarks/json_check_cost.py [--base /path/to/another/checkout]

Times ``jsonlimits.check`` on the bodies of the throughput shape: a push of 100 messages as
``reginamq bench`` sends it (256-byte payloads), the ack of a pop of 108 as its consumers send
it, and a push of one. With ``--base``, the same check of another checkout runs beside it,
alternated round by round, so the two figures of a line come from the same minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
import uuid

import orjson

from reginamq.bench import load
from reginamq.bench.config import BenchConfig
from reginamq.http import jsonlimits


def bodies() -> dict[str, bytes]:
    cfg = BenchConfig(rate=1000, run_id="json-check")
    partitions = [str(uuid.uuid4()) for _ in range(4)]
    lease = str(uuid.uuid4())
    ack = orjson.dumps({"consumerGroup": "__QUEUE_MODE__", "acknowledgments": [
        {"transactionId": f"json-check-0-{n}", "partitionId": partitions[n % 4], "leaseId": lease,
         "status": "completed"} for n in range(108)]})
    return {
        "push of 100": load.build_push_body(cfg, 0, 5, [0] * 200, time.time_ns(), 0),
        "ack of 108": ack,
        "push of 1": orjson.dumps({"items": [{"queue": "q", "partition": "p", "payload": {"n": 1, "x": "x" * 200}}]}),
    }


def per_call_us(check, body: bytes, calls: int) -> float:
    check(body)
    started = time.perf_counter()
    for _ in range(calls):
        check(body)
    return (time.perf_counter() - started) / calls * 1e6


def load_check(checkout: str):
    spec = importlib.util.spec_from_file_location("base_jsonlimits", f"{checkout}/reginamq/http/jsonlimits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="another checkout whose check runs beside this one")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checks = {"this checkout": jsonlimits.check}
    if args.base:
        checks = {"base": load_check(args.base), **checks}
    for name, body in bodies().items():
        times: dict[str, list[float]] = {label: [] for label in checks}
        for _ in range(args.rounds):
            for label, check in checks.items():
                times[label].append(per_call_us(check, body, args.calls))
        figures = ", ".join(
            f"{label} {statistics.median(values):,.0f} µs (runs {', '.join(f'{v:,.0f}' for v in values)})"
            for label, values in times.items())
        print(f"{name} ({len(body):,} bytes): {figures}")


if __name__ == "__main__":
    main()
