"""Latency histograms and interval counters that processes can merge cheaply.

Every producer and consumer process keeps its own counters and histogram and sends the
*difference* since its last report to the parent every ``--report`` seconds. A log-linear
histogram (HdrHistogram's layout: 128 linear sub-buckets per power of two, so under 0.8 %
relative error) makes that merge an element-wise sum and keeps percentiles exact to the
bucket, from 1 µs to 60 s, in about 2,600 integers.
"""

from __future__ import annotations

import dataclasses
import math

SUB_BITS = 7
SUB = 1 << SUB_BITS  # 128 sub-buckets per power of two -> < 0.8 % relative error
LOWEST_US = 1
HIGHEST_US = 60_000_000  # 60 s


def bucket_index(value_us: int) -> int:
    """The bucket of a value in microseconds (clamped to 1 µs .. 60 s)."""
    if value_us < 2 * SUB:
        return value_us if value_us >= LOWEST_US else LOWEST_US
    if value_us > HIGHEST_US:
        value_us = HIGHEST_US
    shift = value_us.bit_length() - SUB_BITS - 1
    return 2 * SUB + (shift - 1) * SUB + (value_us >> shift) - SUB


def bucket_bounds(index: int) -> tuple[int, int]:
    """The values ``[low, high)`` a bucket holds, in microseconds."""
    if index < 2 * SUB:
        return index, index + 1
    shift = (index - 2 * SUB) // SUB + 1
    low = ((index - 2 * SUB) % SUB + SUB) << shift
    return low, low + (1 << shift)


N_BUCKETS = bucket_index(HIGHEST_US) + 1


class Histogram:
    """A mergeable latency histogram in microseconds."""

    __slots__ = ("count", "counts", "max", "min", "total")

    def __init__(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def record(self, value_us: int) -> None:
        if value_us < 1:
            value_us = 1
        self.counts[bucket_index(value_us)] += 1
        self.count += 1
        self.total += value_us
        if value_us > self.max:
            self.max = value_us
        if self.min == 0 or value_us < self.min:
            self.min = value_us

    def record_many(self, values_us) -> None:
        """Record a batch (the consumer's hot path: one call per pop)."""
        counts = self.counts
        lo, hi = LOWEST_US, HIGHEST_US
        total = 0
        n = 0
        vmin = self.min or hi
        vmax = self.max
        for value in values_us:
            if value < lo:
                value = lo
            elif value > hi:
                value = hi
            if value < 2 * SUB:
                counts[value] += 1
            else:
                shift = value.bit_length() - SUB_BITS - 1
                counts[2 * SUB + (shift - 1) * SUB + (value >> shift) - SUB] += 1
            total += value
            n += 1
            if value > vmax:
                vmax = value
            if value < vmin:
                vmin = value
        if n:
            self.count += n
            self.total += total
            self.max = vmax
            self.min = vmin

    def merge(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self._merge_summary(other.count, other.total, other.min, other.max)

    def _merge_summary(self, count: int, total: int, vmin: int, vmax: int) -> None:
        if count:
            self.min = vmin if self.min == 0 else min(self.min, vmin)
            self.max = max(self.max, vmax)
        self.count += count
        self.total += total

    def percentile(self, q: float) -> float:
        """The value at quantile ``q`` (0..100), in microseconds (the bucket's midpoint,
        clamped to the observed min/max); 0.0 when empty."""
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(q / 100.0 * self.count - 1e-9))
        rank = min(rank, self.count)
        seen = 0
        for index, n in enumerate(self.counts):
            if n:
                seen += n
                if seen >= rank:
                    low, high = bucket_bounds(index)
                    mid = (low + high - 1) / 2.0
                    return float(min(max(mid, self.min), self.max))
        return float(self.max)

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def to_sparse(self) -> dict:
        """A compact picklable form (only non-empty buckets) for the multiprocessing queue."""
        return {"b": {i: n for i, n in enumerate(self.counts) if n}, "c": self.count,
                "t": self.total, "lo": self.min, "hi": self.max}

    def merge_sparse(self, sparse: dict) -> None:
        counts = self.counts
        for index, n in sparse["b"].items():
            counts[index] += n
        self._merge_summary(sparse["c"], sparse["t"], sparse["lo"], sparse["hi"])

    def reset(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.count = self.total = self.min = self.max = 0


PRODUCER_FIELDS = ("offered", "accepted", "shed", "push_err", "push_err_msgs", "push_reqs")
CONSUMER_FIELDS = ("popped", "acked", "pop_err", "ack_err", "ack_err_msgs", "pop_reqs", "empty_pops",
                   "ack_reqs", "ack_rtt_ns")
COUNTER_FIELDS = PRODUCER_FIELDS + CONSUMER_FIELDS


@dataclasses.dataclass
class Interval:
    """What all processes reported for one report interval (or, merged, for the whole run)."""

    counters: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(COUNTER_FIELDS, 0))
    latency: Histogram = dataclasses.field(default_factory=Histogram)
    pacer_lag_max_ns: int = 0

    def add_snapshot(self, snapshot: dict) -> None:
        for key, value in snapshot["counters"].items():
            self.counters[key] = self.counters.get(key, 0) + value
        if snapshot.get("latency"):
            self.latency.merge_sparse(snapshot["latency"])
        self.pacer_lag_max_ns = max(self.pacer_lag_max_ns, snapshot.get("pacer_lag_max_ns", 0))

    def merge(self, other: Interval) -> None:
        for key, value in other.counters.items():
            self.counters[key] = self.counters.get(key, 0) + value
        self.latency.merge(other.latency)
        self.pacer_lag_max_ns = max(self.pacer_lag_max_ns, other.pacer_lag_max_ns)

    def avg_ack_rtt_ms(self) -> float:
        reqs = self.counters.get("ack_reqs", 0)
        return self.counters.get("ack_rtt_ns", 0) / reqs / 1e6 if reqs else 0.0
