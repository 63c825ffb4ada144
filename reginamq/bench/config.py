"""The options of one bench run, in one picklable object that every process receives.

Besides the flags it decides what the flags leave open: the consumers per group, and how many
producer and consumer processes carry the load. Each process is given well under what it can
do, so the generator is never what limits a run: a saturated producer falls behind its
schedule and a saturated consumer drains late, and both would be read as the broker's
latency. Options that cannot be measured together are refused here, before anything starts.
"""

from __future__ import annotations

import dataclasses
import math
import os
import uuid

from reginamq.engine.queues import derived_namespace_task

# Messages a second one producer process is given: about half of what one process can offer at
# the default batch, so it stays far from saturation and the pacer stays on schedule.
PRODUCER_PROC_CAPACITY = 50_000
# Small batches cost the producer per request, not per message, so a process is also given at
# most this many push requests a second, which keeps it as far from saturation at batch 1.
PRODUCER_PROC_REQUESTS = 1_500
# Messages a second one consumer process is given to parse, record and ack.
CONSUMER_PROC_CAPACITY = 50_000
# Long polls one consumer process holds open: each consumer's pop times out every second, so a
# process of 250 answers at least 250 pops a second even with nothing to deliver.
CONSUMER_PROC_LONG_POLLS = 250
QUEUE_MODE = None
TRANSPORTS = ("http", "library", "null")
DEFAULT_CONSUMERS = 4

# Named shapes (``--shape``): the flags each stands for; a flag given on the command line wins.
# Each keeps the defaults' pushes (100 messages of 256 bytes over 200 partitions), pop batch
# 1,000 and asynchronous acks, and deletes completed messages after 60 s.
SHAPES: dict[str, dict] = {
    # the shape the results page's throughput figures use: few consumers, each pop wide
    "throughput": {"consumers": 2, "pop_partitions": 25, "completed_retention": 60},
    # many consumers, each pop claiming one partition
    "consumers16": {"consumers": 16, "pop_partitions": 1, "completed_retention": 60},
    # Queen's 24-hour soak's consumers: 600 closed-loop drainers, 256 acks in flight each (the
    # soak kept completed messages 300 s: add --completed-retention 300 for that too)
    "soak": {"consumers": 600, "pop_partitions": 1, "ack_inflight": 256, "completed_retention": 60},
}


@dataclasses.dataclass
class BenchConfig:
    rate: float
    duration: float = 30.0
    push_batch: int = 100
    payload: int = 256
    payload_fill: str = "letter"  # or "text": what pads a payload to its size (load.py)
    transaction_ids: str = "counter"  # or "uuid4", "uuid7": what each message's transactionId is (load.py)
    partitions: int = 200
    active: int = 0
    rotate_seconds: float = 1.0
    queue: str = ""
    queues: int = 1
    pop_namespace: bool = False  # under --queues: every consumer pops the queues' namespace
    consumers: int | None = None  # DEFAULT_CONSUMERS, or at least one per queue under --queues
    groups: int = 0
    pop_batch: int = 1000
    pop_partitions: int = 1
    per_partition: bool = False
    manual_ack: bool = True
    ack_async: bool = True
    ack_inflight: int = 16
    max_inflight: int = 20_000
    dedup_window: int | None = None
    completed_retention: int | None = None
    lease_seconds: int | None = None
    report: float = 5.0
    drain: float = 10.0
    producer_procs: int = 0
    consumer_procs: int = 0
    pop_timeout_ms: int = 1000
    push_timeout: float = 30.0
    run_id: str = ""
    binary_push: bool = False
    framed_pop: bool = False
    verify: bool = False
    pipeline_stages: int = 0
    crash_after_pops: int = 0
    retry_seconds: float = 30.0
    transport: str = "http"  # or "library", "null": what the load calls (inprocess.py)
    library_processes: bool = False  # the library in each producer and consumer process, not one

    def __post_init__(self) -> None:
        if not self.queue:
            self.queue = f"bench-{uuid.uuid4().hex[:8]}"
        if not self.run_id:
            self.run_id = uuid.uuid4().hex[:8]
        if self.consumers is None:
            self.consumers = DEFAULT_CONSUMERS if self.pop_namespace else max(DEFAULT_CONSUMERS, self.queues)
        if self.pipeline_stages or self.crash_after_pops:
            self.verify = True
        self._check_queues()
        self._check_transport()
        if self.active <= 0 or self.active > self.space:
            self.active = self.space
        cores = os.cpu_count() or 1
        if self.producer_procs <= 0:
            needed = max(math.ceil(self.rate / PRODUCER_PROC_CAPACITY),
                         math.ceil(self.rate / self.push_batch / PRODUCER_PROC_REQUESTS))
            self.producer_procs = max(1, min(cores * 2, needed))
        if self.consumer_procs <= 0 and self.consumers > 0:
            deliveries = self.rate * max(1, self.groups)
            self.consumer_procs = max(1, min(cores * 2, self.total_consumers,
                                             max(math.ceil(deliveries / CONSUMER_PROC_CAPACITY),
                                                 math.ceil(self.total_consumers / CONSUMER_PROC_LONG_POLLS))))
        self.consumer_procs = min(self.consumer_procs, self.consumer_slots)  # 0 with --consumers 0

    def _check_queues(self) -> None:
        """Refuse what --queues cannot measure rather than measure something other than what was asked."""
        if self.queues < 1:
            raise ValueError("--queues must be at least 1")
        if self.queues == 1:
            if self.pop_namespace:
                raise ValueError("--pop-namespace pops the namespace of --queues N > 1")
            return
        if self.verify:
            raise ValueError("--verify (and --pipeline-stages, --crash-after-pops) work on one queue: "
                             "drop --queues")
        if self.per_partition:
            raise ValueError("--per-partition works on one queue: drop --queues or pop wildcard")
        if 0 < self.consumers < self.queues and not self.pop_namespace:
            raise ValueError(f"--queues {self.queues} needs at least as many --consumers (one long poll per "
                             f"queue at least), got {self.consumers}")

    def _check_transport(self) -> None:
        """The load through the library does the plain load only (inprocess.py)."""
        if self.transport not in TRANSPORTS:
            raise ValueError(f"--transport is one of {', '.join(TRANSPORTS)}")
        if self.transport == "http":
            if self.library_processes:
                raise ValueError("--library-processes places the library: give --transport library")
            return
        given = [flag for flag, on in (("--verify", self.verify), ("--per-partition", self.per_partition),
                                       ("--binary-push", self.binary_push), ("--framed-pop", self.framed_pop),
                                       ("--pop-namespace", self.pop_namespace)) if on]
        if given:
            raise ValueError(f"{', '.join(given)} work over HTTP only: drop them or --transport {self.transport}")
        if self.transport == "null" and self.library_processes:
            raise ValueError("--transport null counts messages in one process: drop --library-processes")

    @property
    def space(self) -> int:
        """Partitions in all queues together, the range --active moves over."""
        return self.partitions * self.queues

    @property
    def cover_seconds(self) -> float:
        """Seconds the --active window takes to move over the whole space once."""
        return self.space / self.active * self.rotate_seconds

    @property
    def consumer_slots(self) -> int:
        """Consumers in all: the drainers, plus under --pipeline-stages each stage's."""
        return self.total_consumers + self.pipeline_stages * self.consumers

    @property
    def group_names(self) -> list[str | None]:
        """Consumer groups: ``[None]`` (queue mode) or G named groups (fan-out)."""
        if self.groups <= 0:
            return [QUEUE_MODE]
        return [f"g{i}" for i in range(self.groups)]

    @property
    def total_consumers(self) -> int:
        return self.consumers * len(self.group_names)

    @property
    def fanout(self) -> int:
        return len(self.group_names)

    @property
    def push_req_rate(self) -> float:
        return self.rate / self.push_batch

    def queue_options(self) -> dict:
        """The options to configure on the queue before the run (only what was asked for)."""
        options: dict = {}
        if self.dedup_window is not None:
            options["dedupWindowSeconds"] = self.dedup_window
        if self.completed_retention is not None:
            options["completedRetentionSeconds"] = self.completed_retention
            options["retentionEnabled"] = True
        if self.lease_seconds is not None:
            options["leaseTime"] = self.lease_seconds
        return options

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def partition_name(index: int) -> str:
    return f"p-{index:06d}"


def queue_name(cfg: BenchConfig, index: int) -> str:
    """One queue keeps the plain name (``--queue``); under --queues each gets a numbered suffix."""
    if cfg.queues == 1:
        return cfg.queue
    return f"{cfg.queue}.q{index:0{max(4, len(str(cfg.queues - 1)))}d}"


def namespace_task(cfg: BenchConfig) -> tuple[str | None, str | None]:
    """The selection holding exactly the --queues names (``<queue>.q0000``...): the namespace the
    broker derives for them, and the task too when ``<queue>`` names one (``a.b.q0000``)."""
    namespace, task = derived_namespace_task(queue_name(cfg, 0))
    return namespace, task if "." in cfg.queue else None


def queue_names(cfg: BenchConfig) -> list[str]:
    return [queue_name(cfg, i) for i in range(cfg.queues)]


def locate(cfg: BenchConfig, slot: int) -> tuple[int, int]:
    """(queue index, partition index) of a slot of the whole space.

    Neighbouring slots land on different queues, so an --active window of at least --queues
    slots keeps every queue busy instead of filling one queue after another.
    """
    return slot % cfg.queues, slot // cfg.queues
