"""What every load process of a run shares, whatever it loads: its set-up, its counting, and
how it reports to the parent and is stopped by it.

A child leaves Ctrl-C to the parent, which stops the children in order (producers, drain,
consumers) through multiprocessing events. Each child keeps its own counters and latency
histogram and hands the parent the *difference* since its last report at every tick of the
shared report clock (:class:`Reporter`); the parent only adds them up. Requests are counted
the way Queen counts them (:func:`tally`): a request any of whose messages did not go through
is one failed request.

The plain load (:mod:`.load`), the verifying load (:mod:`.verify`) and the ceiling's SQL
load (:mod:`.ceiling`) all build on this module, which depends on none of them.
"""

from __future__ import annotations

import asyncio
import signal
import time

from reginamq.bench.latency import Histogram

try:
    import uvloop
except ImportError:  # an optional dependency (not on Windows): asyncio's own loop then
    uvloop = None


def child_setup() -> None:
    """Children leave Ctrl-C to the parent, which stops them in order through the events."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if uvloop is not None:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


class Reporter:
    """This process's counters and histogram, handed to the parent as deltas every interval."""

    def __init__(self, kind: str, index: int, fields: tuple, queue, start_ns: int, report_s: float):
        self.kind, self.index, self.queue = kind, index, queue
        self.fields = fields
        self.counters = dict.fromkeys(fields, 0)
        self.latency = Histogram()
        self.pacer_lag_max_ns = 0
        self.start_ns = start_ns
        self.report_ns = int(report_s * 1e9)
        self.tick = 1
        self.extra = None  # under --verify: the records and ledgers to hand over with each snapshot

    def next_tick_ns(self) -> int:
        return self.start_ns + self.tick * self.report_ns

    def send(self, final: bool = False) -> None:
        snapshot = {"kind": self.kind, "index": self.index, "tick": self.tick, "final": final,
                    "counters": self.counters, "latency": self.latency.to_sparse() if self.latency.count else None,
                    "pacer_lag_max_ns": self.pacer_lag_max_ns}
        if self.extra is not None:
            snapshot["verify"] = self.extra(final)
        self.queue.put(snapshot)
        self.counters = dict.fromkeys(self.fields, 0)
        self.latency.reset()
        self.pacer_lag_max_ns = 0

    async def run(self) -> None:
        """Send a snapshot at every tick of the shared report clock."""
        while True:
            await asyncio.sleep(max(0.0, (self.next_tick_ns() - time.monotonic_ns()) / 1e9))
            self.send()
            self.tick += 1


_DONE = {"push": "accepted", "ack": "acked"}


def tally(counters, kind: str, ok: int, n: int) -> None:
    """Count a request of ``n`` messages of which ``ok`` went through; any shortfall makes it
    one failed request (Queen counts requests) and ``n - ok`` failed messages."""
    counters[_DONE[kind]] += ok
    if ok < n:
        counters[f"{kind}_err"] += 1
        counters[f"{kind}_err_msgs"] += n - ok


async def timed_pop(session, url: str, params: dict, counters) -> tuple[int, bytes, int] | None:
    """One pop request, counted: (status, body, receive instant in ns), or None without an answer."""
    try:
        async with session.get(url, params=params) as response:
            raw = await response.read()
            status = response.status
    except Exception:
        counters["pop_err"] += 1
        return None
    counters["pop_reqs"] += 1
    if status == 204:
        counters["empty_pops"] += 1
    return status, raw, time.monotonic_ns()


def stop_processes(processes, timeout: float) -> None:
    """Wait for processes told to stop; end the ones that do not."""
    for process in processes:
        process.join(timeout=timeout)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5)
