"""What a run prints and writes: the header, one line per interval, the final aggregate line,
``--json`` (config, every interval, final) and ``--plot`` (throughput, latency, memory).

The fields and their order follow Queen's goload reports, so a reginamq report can be read
beside a Queen report line by line.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from reginamq.bench.config import BenchConfig, queue_name


def header(cfg: BenchConfig, target: str, cpu_scope: str) -> list[str]:
    """The configuration, printed first (Queen's ``goload -mode openloop ->`` lines)."""
    mode = "queue mode" if cfg.groups <= 0 else f"groups={cfg.groups} (fan-out)"
    pops = "per-partition" if cfg.per_partition else f"wildcard, {cfg.pop_partitions} partition(s) per pop"
    ack = "manualAck=false (autoAck)"
    if cfg.manual_ack:
        ack = f"manualAck=true ackAsync={str(cfg.ack_async).lower()}"
        ack += f" ackInflight={cfg.ack_inflight}" if cfg.ack_async else ""
    rotation = (f"active={cfg.active} (rotate every {cfg.rotate_seconds:g} s) | "
                f"{cfg.rate / cfg.active:,.1f} msg/s per active partition | space covered in "
                f"{cfg.cover_seconds:,.0f} s"
                if cfg.active < cfg.space
                else f"active=all | {cfg.rate / cfg.space:,.1f} msg/s per partition")
    space, spread = f"{cfg.partitions}", ""
    if cfg.queues > 1:
        space = f"{cfg.queues} queues x {cfg.partitions} = {cfg.space:,}"
        spread = (f" (each popping the {cfg.queues} queues' namespace)" if cfg.pop_namespace
                  else f" (round robin over the {cfg.queues} queues)")
    lines = [
        f"reginamq bench -mode openloop -> {_queues(cfg)} partitions={cfg.partitions}"
        f"{' per queue' if cfg.queues > 1 else ''} consumers={cfg.consumers} {mode} {ack}",
        f"  offered: rate={cfg.rate:,.0f} msg/s | push-batch={cfg.push_batch} -> {cfg.push_req_rate:,.1f} req/s "
        f"across {cfg.producer_procs} producer proc(s) | max-inflight={cfg.max_inflight} | payload={cfg.payload}B",
        f"  partitions: space={space} | {rotation}",
        f"  consumers: {cfg.total_consumers} drainers{spread} in {cfg.consumer_procs} consumer proc(s) | "
        f"pop-batch={cfg.pop_batch} | {pops}",
        f"  duration={cfg.duration:g} s | report every {cfg.report:g} s | drain up to {cfg.drain:g} s",
        f"  target: {target}",
        f"  cpu: {cpu_scope}",
    ]
    return lines


def _queues(cfg: BenchConfig) -> str:
    if cfg.queues == 1:
        return f"queue={cfg.queue}"
    return f"queues={queue_name(cfg, 0)}..{queue_name(cfg, cfg.queues - 1)}"


def configure_line(cfg: BenchConfig) -> str | None:
    options = cfg.queue_options()
    if not options:
        return None
    return f"[configure] {_queues(cfg)} " + " ".join(f"{k}={v}" for k, v in options.items())


def _num(value) -> str:
    return f"{value:,}"


def _opt(value, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def line(row: dict) -> str:
    """One interval line: cumulative counts, the interval's rates, latency and costs."""
    tag = f"[{row['t']:>5.0f}s{'*' if row.get('phase') == 'drain' else ' '}]"
    return (f"{tag} offered={_num(row['offered'])} accepted={_num(row['accepted'])} shed={_num(row['shed'])} "
            f"popped={_num(row['popped'])} acked={_num(row['acked'])} "
            f"err={row['push_err']}/{row['pop_err']}/{row['ack_err']} | "
            f"in={row['in_rate']:,.0f}/s out={row['out_rate']:,.0f}/s | "
            f"{_latency(row)} | ack rtt={row['ack_rtt_ms']:.1f} ms | "
            f"cpu broker={_opt(row['cpu_broker'], '.2f')} pg={row['cpu_pg']:.2f} gen={row['cpu_gen']:.2f} | "
            f"rss={_opt(row['broker_rss_mb'], ',.0f', ' MB')} db={_opt(row['db_mb'], ',.0f', ' MB')}")


def _latency(row: dict) -> str:
    if not row["interval"]["popped"]:
        return "e2e p50=- p99=- p99.9=- ms"
    return f"e2e p50={row['p50_ms']:.1f} p99={row['p99_ms']:.1f} p99.9={row['p999_ms']:.1f} ms"


def final_line(final: dict) -> str:
    """The whole-run aggregate (Queen's final line), rates over the load duration."""
    tag = f"final {final['duration_s']:.0f}s" + (", interrupted" if final.get("interrupted") else "")
    return (f"[{tag}] offered={_num(final['offered'])} accepted={_num(final['accepted'])} "
            f"shed={_num(final['shed'])} popped={_num(final['popped'])} acked={_num(final['acked'])} "
            f"push/pop/ack errors={final['push_err']}/{final['pop_err']}/{final['ack_err']} | "
            f"in={final['in_rate']:,.0f}/s out={final['out_rate']:,.0f}/s | "
            f"e2e p50={final['p50_ms']:.2f} p99={final['p99_ms']:.2f} p99.9={final['p999_ms']:.2f} ms | "
            f"avg ack rtt={final['ack_rtt_ms']:.2f} ms | "
            f"cpu broker={_opt(final['cpu_broker'], '.2f')} pg={final['cpu_pg']:.2f} gen={final['cpu_gen']:.2f} "
            f"(busiest gen proc {final['cpu_gen_busiest']:.2f}) | "
            f"rss max={_opt(final['broker_rss_mb_max'], ',.0f', ' MB')} db={_opt(final['db_mb'], ',.0f', ' MB')}")


# CPU pressure (the share of time some task waited for a core) above which the summary warns
# that broker, PostgreSQL and generator are queueing for the cores, so the tail latency is the
# machine's as much as the broker's.
SATURATED = 0.25

# Pacer lag above which the summary says the generator itself stopped running. The pacer never
# waits for the broker (a push over the in-flight cap is shed on time), so a pacer seconds late
# means the generator's own process was not scheduled (or the machine paused), whatever the
# broker did.
GENERATOR_STALLED_MS = 1_000.0


def summary_lines(final: dict) -> list[str]:
    """Derived figures a reader wants next to the final line."""
    lines = []
    cores = (final["cpu_broker"] or 0.0) + final["cpu_pg"]
    if final["cpu_broker"] is not None and cores > 0:
        lines.append(f"  efficiency: {final['in_rate'] / cores:,.0f} msg/s per core of broker + PostgreSQL "
                     f"({cores:.2f} cores)")
    lines.append(f"  generator: {final['cpu_gen']:.2f} cores, busiest process {final['cpu_gen_busiest']:.2f} "
                 f"cores, worst pacer lag {final['pacer_lag_max_ms']:.1f} ms")
    if final["pacer_lag_max_ms"] > GENERATOR_STALLED_MS:
        lines.append(f"  warning: the generator fell {final['pacer_lag_max_ms'] / 1000:.1f} s behind its schedule: "
                     "its own process did not run (the pacer never waits for the broker), so the shed and the "
                     "tail of that stretch are the machine's, not the broker's")
    if final.get("cpu_wait") is not None:
        lines.append(f"  machine: a task waited for a core {100 * final['cpu_wait']:.0f}% of the time (CPU pressure)"
                     + ("; the tail is the machine's as much as the broker's" if final["cpu_wait"] > SATURATED else ""))
    lines.extend(_pop_lines(final))
    if final["push_err_msgs"] or final["ack_err_msgs"]:
        lines.append(f"  messages lost to errors: push {final['push_err_msgs']:,}, ack {final['ack_err_msgs']:,}")
    return lines


def _pop_lines(final: dict) -> list[str]:
    """How the pops were answered: empty answers at the client, and on the broker's side the
    pops that asked the database, those that found nothing, and the pops each push woke; how
    many ack requests each rq_ack call applied."""
    if not final.get("pop_reqs"):
        return []
    seconds = final["elapsed_s"] or 1.0
    lines = [f"  pops: {final['pop_reqs'] / seconds:,.0f}/s, of which empty {final['empty_pops'] / seconds:,.0f}/s "
             f"({100 * final['empty_pops'] / final['pop_reqs']:.0f}%)"]
    if final.get("pushes"):
        lines.append(f"  broker: {final['pop_queries'] / seconds:,.0f} pop queries/s, "
                     f"{final['empty_queries'] / seconds:,.0f}/s found nothing; "
                     f"{final['woken_by_push'] / final['pushes']:.2f} pops woken a push "
                     f"({final['push_notices'] / seconds:,.0f} push announcements heard/s)")
    if final.get("ack_calls"):
        requests, calls = final["ack_requests"], final["ack_calls"]
        lines.append(f"  acks: {requests / seconds:,.0f} requests/s in {calls / seconds:,.0f} rq_ack calls/s "
                     f"({requests / calls:.2f} requests a call)")
    return lines


def write_json(path: Path, cfg: BenchConfig, header_lines: list[str], intervals: list[dict], final: dict,
               extra: dict | None = None) -> None:
    document = {"config": cfg.to_dict(), "header": header_lines, "intervals": intervals, "final": final,
                **(extra or {})}
    Path(path).write_text(json.dumps(document, indent=2) + "\n")


def check_plot_available() -> None:
    """Fail before the run, not after it, when --plot cannot work."""
    if importlib.util.find_spec("matplotlib") is None:
        raise RuntimeError("--plot needs matplotlib: pip install 'reginamq[plot]'")


def write_plot(path: Path, cfg: BenchConfig, intervals: list[dict]) -> None:
    # matplotlib is the optional [plot] extra, and heavy: imported only when a plot is drawn,
    # pyplot only once the file-only Agg backend is chosen.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [row["t"] for row in intervals]
    figure, (throughput, latency, memory) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    throughput.plot(t, [row["in_rate"] for row in intervals], label="in (accepted/s)")
    throughput.plot(t, [row["out_rate"] for row in intervals], label="out (acked/s)")
    throughput.axhline(cfg.rate, color="grey", linestyle=":", label="offered")
    throughput.set_ylabel("msg/s")
    throughput.legend(loc="lower right")
    sampled = [row["interval"]["popped"] > 0 for row in intervals]  # no pops, no latency: a gap
    latency.plot(t, [row["p50_ms"] if ok else float("nan") for row, ok in zip(intervals, sampled, strict=True)],
                 label="e2e p50")
    latency.plot(t, [row["p99_ms"] if ok else float("nan") for row, ok in zip(intervals, sampled, strict=True)],
                 label="e2e p99")
    latency.set_ylabel("ms (CO-corrected)")
    latency.set_yscale("log")
    latency.legend(loc="upper right")
    memory.plot(t, [row["broker_rss_mb"] or 0 for row in intervals], label="broker RSS")
    memory.set_ylabel("MB")
    memory.set_ylim(bottom=0)  # a flat line must look flat
    for axis in (throughput, latency, memory):
        axis.axvline(cfg.duration, color="grey", linewidth=0.8)  # load ends, drain begins
    memory.set_xlabel("seconds")
    memory.legend(loc="lower right")
    figure.suptitle(f"reginamq bench: {cfg.rate:,.0f} msg/s offered, push batch {cfg.push_batch}, "
                    f"{cfg.space} partitions{f' in {cfg.queues} queues' if cfg.queues > 1 else ''}, "
                    f"{cfg.payload} B")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
