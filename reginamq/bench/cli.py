"""The ``reginamq bench`` command group: the open-loop run (default) and ``ceiling``.

Both take the same shape options, so a ceiling measures the same load as the run it is set
beside. Flags that cannot be measured together are a usage error before anything starts
(:class:`~reginamq.bench.config.BenchConfig` checks them). SIGTERM stops a run as Ctrl-C does,
so an own broker and its PostgreSQL are stopped whichever way the run ends. Every
``reginamq`` command loads this module, so the run's machinery is loaded only when a bench runs.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from reginamq.bench.config import SHAPES, TRANSPORTS, BenchConfig
from reginamq.bench.report import check_plot_available


def shape_options(function):
    """The load shape, shared by the bench run and the ceiling so both measure the same thing."""
    options = [
        click.option("--push-batch", type=click.IntRange(1, 10_000), default=100, show_default=True,
                     help="Messages per push request."),
        click.option("--payload", type=click.IntRange(32, 4_000_000), default=256, show_default=True,
                     help="Payload bytes per message (JSON, padded)."),
        click.option("--payload-fill", type=click.Choice(["letter", "text"]), default="letter", show_default=True,
                     help="What pads a payload: one letter repeated (compresses to almost nothing) or words "
                          "and numbers (compresses as real records do)."),
        click.option("--transaction-ids", type=click.Choice(["counter", "uuid4", "uuid7"]), default="counter",
                     show_default=True,
                     help="Each message's transactionId: the run, producer and a count; a random UUID (what "
                          "queen-mq mints by default); or a UUIDv7 (what Queen's JavaScript and Go clients mint, "
                          "and queen-mq with the uuid7 package installed)."),
        click.option("--partitions", type=click.IntRange(1), default=200, show_default=True,
                     help="Partition space of the queue (of each queue, with --queues)."),
        click.option("--consumers", type=click.IntRange(0), default=None,
                     help="Closed-loop consumers per group (0 = push only) [default: 4; with --queues N, "
                          "max(4, N)]."),
        click.option("--groups", type=click.IntRange(0), default=0, show_default=True,
                     help="0 = queue mode; G > 0 = G consumer groups (fan-out), each with --consumers."),
        click.option("--pop-batch", type=click.IntRange(1, 10_000), default=1000, show_default=True,
                     help="Messages per pop."),
        click.option("--duration", type=click.FloatRange(1), default=30, show_default=True,
                     help="Seconds of load."),
        click.option("--report", type=click.FloatRange(0.5), default=5, show_default=True,
                     help="Seconds per report line."),
        click.option("--producer-procs", type=click.IntRange(0), default=0,
                     help="Producer processes [default: auto, enough for the rate]."),
        click.option("--consumer-procs", type=click.IntRange(0), default=0,
                     help="Consumer processes [default: auto]."),
        click.option("--database-url", default=None,
                     help="The broker's PostgreSQL (for the database size with --url; the ceiling's target)."),
        click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                     help="Folder of the own embedded PostgreSQL [default: a temporary one, removed after]."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group(invoke_without_command=True, context_settings={"show_default": False})
@click.option("--url", default=None, help="An existing broker [default: start an own broker].")
@click.option("--shape", type=click.Choice(sorted(SHAPES)), default=None,
              help="A named shape: throughput (2 consumers, pops of 25 partitions), consumers16 (16 "
                   "consumers, pops of 1 partition) or soak (Queen's soak: 600 consumers, pops of 1 "
                   "partition, 256 acks in flight each); all delete completed messages after 60 s. "
                   "Flags given beside it win.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes of the own broker.")
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="An argument for the own broker's `reginamq serve` (repeatable, one word each: "
                   "--serve-arg=--push-flush-spacing-ms --serve-arg=20).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Messages per second offered (open loop). Required.")
@click.option("--active", type=click.IntRange(0), default=0, show_default=True,
              help="Partitions taking pushes at a time (0 = all); the window rotates over the space.")
@click.option("--rotate-seconds", type=click.FloatRange(0.01), default=1, show_default=True,
              help="Seconds between moves of the --active window.")
@click.option("--queue", default="", help="Queue name [default: a fresh bench-xxxxxxxx].")
@click.option("--queues", type=click.IntRange(1), default=1, show_default=True,
              help="N > 1: queues <queue>.q0000..., each with --partitions partitions; --active counts "
                   "over all of them; consumers go round robin over the queues (needs --consumers >= N), "
                   "or pop them all with --pop-namespace.")
@click.option("--pop-namespace", is_flag=True,
              help="With --queues: every consumer pops all the queues through their namespace "
                   "(GET /api/v1/pop?namespace=<queue>) instead of one long poll per queue.")
@click.option("--pop-partitions", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Partitions one wildcard pop may claim.")
@click.option("--per-partition", is_flag=True, help="Pop by partition from an assigned subset, not wildcard.")
@click.option("--manual-ack/--auto-ack", default=True, show_default=True,
              help="Explicit batch acks, or server autoAck=true on pop.")
@click.option("--ack-async/--ack-sync", default=True, show_default=True,
              help="Dispatch each ack without blocking the next pop.")
@click.option("--ack-inflight", type=click.IntRange(1), default=16, show_default=True,
              help="Outstanding async acks per consumer (then the consumer blocks; acks are never shed).")
@click.option("--max-inflight", type=click.IntRange(1), default=20_000, show_default=True,
              help="Messages in flight from producers; over it new pushes are shed (counted, never sent).")
@click.option("--dedup-window", type=click.IntRange(0), default=None,
              help="Queue dedupWindowSeconds [default: the broker's default].")
@click.option("--completed-retention", type=click.IntRange(0), default=None,
              help="Queue completedRetentionSeconds (and retentionEnabled) [default: unset].")
@click.option("--lease-seconds", type=click.IntRange(1), default=None, help="Queue leaseTime.")
@click.option("--drain", type=click.FloatRange(0), default=10, show_default=True,
              help="Seconds to keep consuming after the load until everything accepted was acked.")
@click.option("--binary-push", is_flag=True,
              help="Push with queen-mq's binary push body (application/x-queen-push: transactionIds, "
                   "answered with counts) instead of JSON.")
@click.option("--framed-pop", is_flag=True,
              help="Ask for pops' messages as binary frames (queen-mq's framed_pop, application/x-queen-pop) "
                   "instead of JSON.")
@click.option("--verify", is_flag=True,
              help="Account for every message: 0 lost, 0 reordered, 0 phantoms (exit 1 otherwise); "
                   "pushes and acks are retried, pushes to one partition are serialized.")
@click.option("--pipeline-stages", type=click.IntRange(0, 20), default=0, show_default=True,
              help="With --verify: N ordered stages, each pops queue i-1 and acks + pushes to queue i "
                   "in one transaction; the last queue is verified.")
@click.option("--crash-after-pops", type=click.IntRange(0), default=0, show_default=True,
              help="With --verify: every Nth pop a consumer abandons its batch unacked and restarts.")
@click.option("--retry-seconds", type=click.FloatRange(0), default=30, show_default=True,
              help="With --verify: how long a push, ack or transaction is retried on a 5xx or no answer.")
@click.option("--transport", type=click.Choice(TRANSPORTS), default="http", show_default=True,
              help="What the load calls: a broker over HTTP; the library (reginamq.Broker) in the bench's own "
                   "processes, on --database-url or an embedded PostgreSQL; or nothing (null: ready-made "
                   "answers, the generator's own CPU, to subtract from a library run's).")
@click.option("--library-processes", is_flag=True,
              help="With --transport library: a broker in each producer and consumer process, not all of them "
                   "as tasks of one process over one broker.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None,
              help="Write the config, every interval and the final figures to this file.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="Draw throughput, latency and broker memory over time (needs reginamq[plot]).")
@click.option("--ceiling", "with_ceiling", is_flag=True,
              help="After the run, measure the same PostgreSQL's raw rate and print the ratio.")
@shape_options
@click.pass_context
def bench(ctx: click.Context, **flags) -> None:
    """Open-loop load in Queen's goload semantics, with CPU and memory accounting.

    Without --url it starts its own broker (reginamq serve --workers N) on an embedded
    PostgreSQL in a temporary folder and stops both at the end.
    """
    if ctx.invoked_subcommand is not None:
        return
    if flags["rate"] is None:
        raise click.UsageError("--rate is required (messages per second offered)")
    # Every reginamq command loads this module; the run's machinery (aiohttp, asyncpg, psutil,
    # rich's progress bar, multiprocessing) loads only when a bench runs.
    from reginamq.bench.session import run_session

    if flags["plot_path"] is not None:
        try:
            check_plot_available()
        except RuntimeError as error:
            raise click.UsageError(str(error)) from error
    if flags["serve_args"] and flags["url"]:
        raise click.UsageError("--serve-arg tunes the broker the bench starts; with --url, start yours with them")
    if flags["transport"] != "http" and (flags["url"] or flags["serve_args"] or flags["workers"] != 1):
        raise click.UsageError(f"--transport {flags['transport']} runs no broker process: drop --url, "
                               "--serve-arg and --workers")
    cfg = _config(_with_shape(ctx, flags), rate=flags["rate"])
    if flags["with_ceiling"] and cfg.queues > 1:
        raise click.UsageError("--ceiling measures one table of --partitions partitions, not --queues: "
                               "run `reginamq bench ceiling` on its own")
    _stop_on_sigterm()
    sys.exit(asyncio.run(run_session(cfg, url=flags["url"], workers=flags["workers"],
                                     database_url=flags["database_url"], data_dir=flags["data_dir"],
                                     json_path=flags["json_path"], plot_path=flags["plot_path"],
                                     with_ceiling=flags["with_ceiling"], serve_args=flags["serve_args"])))


@bench.command()
@shape_options
@click.option("--broker-rate", type=float, default=None,
              help="The broker's msg/s for this shape, to print broker/ceiling.")
def ceiling(**flags) -> None:
    """The same PostgreSQL's raw rate for the same shape, through plain SQL (no broker).

    Against --database-url, or an embedded PostgreSQL started in a temporary folder.
    """
    from reginamq.bench.session import run_ceiling_session  # only when it runs: see bench() above

    cfg = _config(flags, rate=1.0)
    _stop_on_sigterm()
    sys.exit(asyncio.run(run_ceiling_session(cfg, database_url=flags["database_url"], data_dir=flags["data_dir"],
                                             broker_rate=flags["broker_rate"])))


CONFIG_FIELDS = {"push_batch", "payload", "payload_fill", "transaction_ids", "partitions", "consumers", "groups",
                 "pop_batch", "duration", "report",
                 "producer_procs", "consumer_procs", "active", "rotate_seconds", "queue", "queues", "pop_namespace",
                 "pop_partitions", "per_partition", "manual_ack", "ack_async", "ack_inflight", "max_inflight",
                 "dedup_window", "completed_retention", "lease_seconds", "drain", "binary_push", "framed_pop", "verify",
                 "pipeline_stages", "crash_after_pops", "retry_seconds", "transport", "library_processes"}


def _with_shape(ctx: click.Context, flags: dict) -> dict:
    """The flags with the named shape's values wherever the command line did not give one."""
    if flags["shape"] is None:
        return flags
    given = {name for name in flags if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    return flags | {name: value for name, value in SHAPES[flags["shape"]].items() if name not in given}


def _stop_on_sigterm() -> None:
    """SIGTERM stops a run like Ctrl-C does, so an own broker and PostgreSQL are still stopped."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _config(flags: dict, rate: float) -> BenchConfig:
    try:
        return BenchConfig(rate=rate, **{key: value for key, value in flags.items() if key in CONFIG_FIELDS})
    except ValueError as error:
        raise click.UsageError(str(error)) from error
