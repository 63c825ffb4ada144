"""``reginamq bench``: the histogram, the open-loop pacer, and a bounded smoke run.

Benchmarks are not tests: nothing here asserts a speed. The smoke run checks only that the
instrument's counts add up against the real test broker.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import subprocess
import sys
import time
import uuid
import zlib

import httpx
import psutil
import pytest
from click.testing import CliRunner

from reginamq.bench.broker import OwnBroker
from reginamq.bench.cli import _config, _with_shape, bench
from reginamq.bench.config import BenchConfig, locate, queue_name, queue_names
from reginamq.bench.latency import HIGHEST_US, N_BUCKETS, Histogram, bucket_bounds, bucket_index
from reginamq.bench.load import InflightGate, Pacer, build_push_body, partition_of
from reginamq.bench.report import summary_lines
from reginamq.bench.session import run_session
from reginamq.bench.system import CPU_PRESSURE, CpuMeter, CpuPressure
from reginamq.http import binary_push
from reginamq.store.dedup_keys import bucket
from tests.conftest import MEMBERS


def exact_percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def test_buckets_tile_the_range_with_one_percent_precision():
    previous_high = 1
    for index in range(1, N_BUCKETS):
        low, high = bucket_bounds(index)
        assert low == previous_high, index
        assert (high - low) / low <= 0.008 or high - low == 1
        assert bucket_index(low) == index and bucket_index(high - 1) == index
        previous_high = high
    assert bucket_index(HIGHEST_US * 10) == N_BUCKETS - 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_match_a_sorted_list(seed):
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(9, 1.5)) + 1 for _ in range(20_000)]  # ~8 ms median, long tail
    histogram = Histogram()
    histogram.record_many(values)
    assert histogram.count == len(values)
    assert histogram.min == min(values) and histogram.max == max(values)
    for q in (50, 90, 99, 99.9, 100):
        expected = exact_percentile(values, q)
        assert histogram.percentile(q) == pytest.approx(expected, rel=0.01, abs=1), q


def test_merge_equals_recording_everything_in_one():
    rng = random.Random(7)
    parts = [[rng.randint(1, 5_000_000) for _ in range(3_000)] for _ in range(4)]
    whole = Histogram()
    for part in parts:
        for value in part:
            whole.record(value)
    merged, via_queue = Histogram(), Histogram()
    for part in parts:
        histogram = Histogram()
        histogram.record_many(part)
        merged.merge(histogram)
        via_queue.merge_sparse(histogram.to_sparse())
    for candidate in (merged, via_queue):
        assert candidate.counts == whole.counts
        assert (candidate.count, candidate.total, candidate.min, candidate.max) == (
            whole.count, whole.total, whole.min, whole.max)
        assert candidate.percentile(99) == whole.percentile(99)


def test_pacer_instants_are_evenly_spaced_across_processes():
    rate, batch, procs, start = 20_000, 100, 3, 1_000_000_000
    pacers = [Pacer(rate, batch, procs, i, start, duration_s=2.0) for i in range(procs)]
    due = sorted(item for pacer in pacers for item in pacer.due(start + 10**10))
    indexes = [g for g, _ in due]
    instants = [t for _, t in due]
    assert indexes == list(range(len(due)))
    assert len(due) == rate * 2 // batch  # exactly rate x duration messages offered
    gaps = {b - a for a, b in itertools.pairwise(instants)}
    assert max(gaps) - min(gaps) <= 1  # 5 ms apart, to the nanosecond rounding
    assert instants[0] == start and all(pacer.next_instant() is None for pacer in pacers)


def test_a_late_pacer_launches_what_it_missed_with_the_scheduled_instants():
    pacer = Pacer(1_000, 10, 1, 0, start_ns=0, duration_s=1.0)
    assert pacer.due(-1) == []
    late = pacer.due(55_000_000)  # woke 55 ms in: pushes at 0, 10, ..., 50 ms are all due
    assert [t for _, t in late] == [0, 10_000_000, 20_000_000, 30_000_000, 40_000_000, 50_000_000]
    assert pacer.next_instant() == 60_000_000


def test_over_max_inflight_pushes_are_shed_not_queued():
    gate = InflightGate(250)
    taken = shed = 0
    for _ in range(5):  # five pushes of 100 while nothing completes
        if gate.try_take(100):
            taken += 100
        else:
            shed += 100
    assert (taken, shed, gate.inflight) == (200, 300, 200)
    gate.give(100)
    assert gate.try_take(100) and gate.inflight == 200


def test_push_body_is_padded_and_sequenced():
    cfg = BenchConfig(rate=1_000, push_batch=5, payload=256, partitions=10)
    sequences = [0] * cfg.partitions
    body = json.loads(build_push_body(cfg, 2, 7, sequences, 123_456_789, first_tx=40))
    items = body["items"]
    assert [item["payload"]["q"] for item in items] == [0, 1, 2, 3, 4] and sequences[7] == 5
    assert {item["partition"] for item in items} == {"p-000007"}
    assert len({item["transactionId"] for item in items}) == 5
    for item in items:
        assert item["payload"]["s"] == 123_456_789 and item["payload"]["p"] == 2 and item["payload"]["k"] == 7
        assert len(json.dumps(item["payload"], separators=(",", ":"))) == 256


@pytest.mark.parametrize(("form", "runs"), [("counter", False), ("uuid4", False), ("uuid7", True)])
def test_transaction_ids_take_the_form_asked_for(form, runs):
    """The form decides where the broker keeps a key (a run for a UUIDv7, a row otherwise)."""
    cfg = BenchConfig(rate=1_000, push_batch=20, payload=256, partitions=10, transaction_ids=form)
    items = json.loads(build_push_body(cfg, 0, 3, [0] * cfg.partitions, 1, first_tx=0))["items"]
    txids = [item["transactionId"] for item in items]
    assert len(set(txids)) == 20
    assert all((bucket(txid) is not None) is runs for txid in txids)
    if form == "uuid4":
        assert all(uuid.UUID(txid).version == 4 for txid in txids)


def test_a_text_fill_pads_to_size_with_words_that_compress_like_text():
    payloads = {}
    for fill in ("letter", "text"):
        cfg = BenchConfig(rate=1_000, push_batch=50, payload=256, partitions=10, payload_fill=fill)
        items = json.loads(build_push_body(cfg, 0, 3, [0] * cfg.partitions, 1, first_tx=0))["items"]
        payloads[fill] = [json.dumps(item["payload"], separators=(",", ":")).encode() for item in items]
        assert all(len(payload) == 256 for payload in payloads[fill])
        assert [item["payload"]["q"] for item in items] == list(range(50))
    assert len({payload[40:] for payload in payloads["text"]}) == 50  # each message's text differs
    letter, text = (len(zlib.compress(b"".join(payloads[fill]))) for fill in ("letter", "text"))
    assert text > 5 * letter

def test_binary_push_body_carries_the_same_messages_as_the_json_one():
    """--binary-push: the same transactionIds and payloads, as the broker decodes them."""
    json_cfg = BenchConfig(rate=1_000, push_batch=5, payload=256, partitions=10, run_id="r", queue="b")
    binary_cfg = BenchConfig(rate=1_000, push_batch=5, payload=256, partitions=10, run_id="r", queue="b",
                            binary_push=True)
    items = json.loads(build_push_body(json_cfg, 2, 7, [0] * 10, 99, first_tx=40))["items"]
    decoded = binary_push.decode_push(build_push_body(binary_cfg, 2, 7, [0] * 10, 99, first_tx=40), 1 << 20)
    assert decoded.counts is True
    assert [(i.queue, i.partition, i.transactionId, json.loads(bytes(i.payload))) for i in decoded.items] == \
        [(i["queue"], i["partition"], i["transactionId"], i["payload"]) for i in items]


def test_active_window_rotates_over_the_whole_space():
    cfg = BenchConfig(rate=1_000, partitions=10, active=2, rotate_seconds=1.0)
    seen = {partition_of(cfg, g, start_ns + second * 1_000_000_000, start_ns)
            for start_ns in [0] for second in range(5) for g in range(4)}
    assert seen == set(range(10))
    assert {partition_of(cfg, g, 0, 0) for g in range(10)} == {0, 1}


def test_queues_split_the_space_so_every_window_touches_every_queue():
    cfg = BenchConfig(rate=1_000, queue="b", queues=5, partitions=3, active=5)
    assert cfg.space == 15 and cfg.consumers == 5
    assert queue_names(cfg) == ["b.q0000", "b.q0001", "b.q0002", "b.q0003", "b.q0004"]
    assert sorted(locate(cfg, slot) for slot in range(cfg.space)) == [(q, p) for q in range(5) for p in range(3)]
    for second in range(3):  # each window of 5 slots holds one partition of every queue
        window = {locate(cfg, partition_of(cfg, g, second * 1_000_000_000, 0)) for g in range(5)}
        assert {q for q, _ in window} == set(range(5)) and {p for _, p in window} == {second}
    wide = BenchConfig(rate=1_000, queue="b", queues=12_345)
    assert queue_name(wide, 7) == "b.q00007" and wide.consumers == 12_345


def test_one_queue_keeps_its_name_and_partition_indexes():
    cfg = BenchConfig(rate=1_000, queue="plain", partitions=10)
    assert queue_names(cfg) == ["plain"] and cfg.consumers == 4
    assert [locate(cfg, slot) for slot in (0, 7)] == [(0, 0), (0, 7)]


def test_a_push_names_the_queue_and_partition_of_its_slot():
    cfg = BenchConfig(rate=1_000, queue="b", queues=4, partitions=3, push_batch=2)
    sequences = [0] * cfg.space
    items = json.loads(build_push_body(cfg, 0, 6, sequences, 1, first_tx=0))["items"]
    assert {(item["queue"], item["partition"]) for item in items} == {("b.q0002", "p-000001")}
    assert [item["payload"]["k"] for item in items] == [6, 6] and sequences[6] == 2


@pytest.mark.parametrize(("options", "refused"), [
    ({"consumers": 3}, "--consumers"),
    ({"verify": True}, "--verify"),
    ({"pipeline_stages": 1}, "--verify"),
    ({"per_partition": True}, "--per-partition"),
])
def test_what_queues_cannot_measure_is_refused(options, refused):
    with pytest.raises(ValueError, match=refused):
        BenchConfig(rate=1_000, queues=4, **options)
    BenchConfig(rate=1_000, queues=4, consumers=0)  # push only needs no consumer per queue
    BenchConfig(rate=1_000, queues=4, consumers=2, pop_namespace=True)  # each pops all four
    with pytest.raises(ValueError, match="--pop-namespace"):
        BenchConfig(rate=1_000, pop_namespace=True)


def test_serve_args_reach_the_own_broker_and_only_it(tmp_path):
    # an out-of-range value: the broker's own command line refuses it, so it did get there
    broker = OwnBroker(data_dir=tmp_path / "pgdata", log_path=tmp_path / "serve.log",
                       serve_args=("--push-flush-spacing-ms", "5000"))
    with pytest.raises(RuntimeError, match="exited with 2"):
        broker.start()
    assert "--push-flush-spacing-ms" in (tmp_path / "serve.log").read_text()
    refused = CliRunner().invoke(bench, ["--url", "http://127.0.0.1:1", "--rate", "10",
                                         "--serve-arg=--push-flush-spacing-ms", "--serve-arg=20"])
    assert refused.exit_code == 2 and "--serve-arg" in refused.output


def test_producer_processes_follow_requests_as_well_as_messages(monkeypatch):
    """A generator that saturates one process measures itself, not the broker."""
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert BenchConfig(rate=20_000, push_batch=100).producer_procs == 1  # 200 requests a second
    assert BenchConfig(rate=120_000, push_batch=100).producer_procs == 3  # messages decide
    assert BenchConfig(rate=3_000, push_batch=1).producer_procs == 2  # requests decide
    assert BenchConfig(rate=100_000, push_batch=1).producer_procs == 8  # at most two per core
    assert BenchConfig(rate=3_000, push_batch=1, producer_procs=1).producer_procs == 1  # as asked


def test_cpu_pressure_is_the_share_of_wall_time_tasks_waited(tmp_path, monkeypatch):
    source = tmp_path / "cpu"
    clock = iter([100.0, 102.0, 104.0])
    monkeypatch.setattr("reginamq.bench.system.time.monotonic", lambda: next(clock))
    pressure = CpuPressure(source)
    source.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=5000000\n"
                      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert pressure.sample() is None  # nothing to compare with yet
    source.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=6500000\n")
    assert pressure.sample() == pytest.approx(0.75)  # 1.5 s of waiting in 2 s
    source.unlink()
    assert pressure.sample() is None  # a kernel without pressure information


def test_cpu_cores_are_measured_over_monotonic_time_not_the_wall_clock(monkeypatch):
    """A time sync stepping the wall clock an hour between two samples must not turn a busy
    interval into an idle one."""
    meter = CpuMeter(lambda: [psutil.Process()])
    meter.sample()
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
    stepped = time.time() + 3600
    monkeypatch.setattr("reginamq.bench.system.time.time", lambda: stepped)
    cores, rss, _ = meter.sample()
    assert cores > 0.3  # one core busy for the interval; over wall time it would read ~0.0001
    assert rss > 0


# burns CPU, says so, burns as much again and ends
_BURNER = """
import sys, time
def burn(seconds):
    started = time.process_time()
    while time.process_time() - started < seconds:
        pass
burn(float(sys.argv[1]))
print("half", flush=True)
sys.stdin.readline()
burn(float(sys.argv[1]))
"""


def test_cpu_of_a_process_that_ends_between_samples_is_counted_once():
    """An autovacuum worker starts and ends between two samples; a backend ends after being
    seen. Their CPU must count (from the parent's children's times), and only once."""
    me = psutil.Process()
    child: subprocess.Popen | None = None
    meter = CpuMeter(lambda: [me, *(p for p in me.children() if child is not None and p.pid == child.pid)])
    meter.sample()
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", _BURNER, "0.2"], input="go\n", capture_output=True, text=True,
                   check=True)  # 0.2 s, then 0.2 s more at once
    cores, _, _ = meter.sample()
    assert cores * (time.monotonic() - started) > 0.35  # ended unseen: counted all the same

    child = subprocess.Popen([sys.executable, "-c", _BURNER, "0.3"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "half\n"
    _, _, procs = meter.sample()  # seen, with its first 0.3 s
    assert child.pid in {p.pid for p in procs}
    started = time.monotonic()
    child.stdin.write("go\n")
    child.stdin.flush()
    child.wait()  # reaped: all its 0.6 s are in our children's times now
    cores, _, _ = meter.sample()
    assert 0.25 < cores * (time.monotonic() - started) < 0.5  # its last 0.3 s, not its whole 0.6


def test_a_process_started_just_after_a_sample_counts_from_its_start():
    """A load opens its database connections in its first second; their backends' CPU belongs
    to the first interval. psutil dates a process from the boot time, which the wall clock may
    have drifted from by a second: compared with the wall clock, such a process looked older
    than the sample and counted only from the next one."""
    me = psutil.Process()
    child: subprocess.Popen | None = None
    meter = CpuMeter(lambda: [p for p in me.children() if child is not None and p.pid == child.pid])
    meter.sample()
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", _BURNER, "0.4"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "half\n"
        cores, _, procs = meter.sample()  # alive, seen for the first time
        assert [p.pid for p in procs] == [child.pid]
        assert cores * (time.monotonic() - started) > 0.35
    finally:
        child.kill()
        child.wait()


def test_a_named_shape_fills_in_what_the_command_line_left_unset():
    context = bench.make_context("bench", ["--rate", "1000", "--shape", "soak", "--consumers", "30"])
    cfg = _config(_with_shape(context, context.params), rate=1000)
    assert (cfg.consumers, cfg.pop_partitions, cfg.ack_inflight, cfg.completed_retention) == (30, 1, 256, 60)
    context = bench.make_context("bench", ["--rate", "1000", "--shape", "throughput"])
    cfg = _config(_with_shape(context, context.params), rate=1000)
    assert (cfg.consumers, cfg.pop_partitions, cfg.ack_inflight) == (2, 25, 16)
    context = bench.make_context("bench", ["--rate", "1000"])
    assert _config(_with_shape(context, context.params), rate=1000).consumers == 4


def _final(**overrides) -> dict:
    final = {"cpu_broker": 0.5, "cpu_pg": 0.5, "in_rate": 10_000, "cpu_gen": 0.2, "cpu_gen_busiest": 0.1,
             "pacer_lag_max_ms": 12.0, "cpu_wait": 0.1, "push_err_msgs": 0, "ack_err_msgs": 0}
    return final | overrides


def test_the_summary_says_when_the_generator_itself_stopped_running():
    assert not [line for line in summary_lines(_final()) if "warning" in line]
    [warning] = [line for line in summary_lines(_final(pacer_lag_max_ms=15_615.0)) if "warning" in line]
    assert "15.6 s behind its schedule" in warning


def test_smoke_run_counts_add_up(broker_url, database_url, tmp_path):
    """About 8 s of load at 2,000 msg/s: every offered message is accounted for."""
    cfg = BenchConfig(rate=2_000, duration=8, report=2, drain=10, partitions=200, push_batch=100,
                      consumers=4, manual_ack=True, ack_async=True, completed_retention=60)
    out = tmp_path / "bench.json"
    code = asyncio.run(run_session(cfg, url=broker_url, workers=1, database_url=database_url, data_dir=None,
                                   json_path=out, plot_path=None, live=False))
    assert code == 0
    document = json.loads(out.read_text())
    final = document["final"]
    assert final["offered"] == final["accepted"] + final["shed"] + final["push_err_msgs"]
    assert final["offered"] == 2_000 * 8
    assert final["shed"] == 0
    assert (final["push_err"], final["pop_err"], final["ack_err"]) == (0, 0, 0)
    assert final["popped"] == final["acked"] == final["accepted"]
    assert final["latency_samples"] == final["popped"]
    assert document["intervals"] and document["config"]["queue"].startswith("bench-")
    if CPU_PRESSURE.exists():
        assert 0.0 <= final["cpu_wait"] <= 1.0
    # the broker's own count of how pops were answered, read from its process metrics
    assert final["pushes"] >= final["push_reqs"]
    assert final["pop_queries"] > 0 and 0 <= final["empty_queries"] <= final["pop_queries"]
    assert final["woken_by_push"] > 0
    # every ack request the bench sent went through an rq_ack call, several to a call at most
    assert 0 < final["ack_calls"] <= final["ack_requests"] and final["ack_requests"] >= final["ack_reqs"]
    [pops, broker, acked] = [line for line in summary_lines(final)
                             if line.startswith(("  pops:", "  broker:", "  acks:"))]
    assert "of which empty" in pops and "pops woken a push" in broker and "requests a call" in acked


@pytest.mark.parametrize("by_namespace", [False, True], ids=["a-poll-per-queue", "namespace-pops"])
def test_many_queues_run_counts_add_up(broker_url, database_url, tmp_path, by_namespace):
    """5 queues x 3 partitions for a few seconds: one consumer per queue, or two consumers each
    popping the queues' namespace, drain all of them."""
    shape = {"pop_namespace": True, "consumers": 2} if by_namespace else {}
    cfg = BenchConfig(rate=300, duration=4, report=2, drain=10, queues=5, partitions=3, push_batch=10,
                      completed_retention=60, lease_seconds=30, **shape)
    out = tmp_path / "bench.json"
    code = asyncio.run(run_session(cfg, url=broker_url, workers=1, database_url=database_url, data_dir=None,
                                   json_path=out, plot_path=None, live=False))
    assert code == 0
    final = json.loads(out.read_text())["final"]
    assert final["offered"] == 300 * 4
    assert final["offered"] == final["accepted"] == final["popped"] == final["acked"]
    assert (final["shed"], final["push_err"], final["pop_err"], final["ack_err"]) == (0, 0, 0, 0)
    answer = httpx.get(f"{broker_url}/api/v1/resources/queues", params={"search": cfg.queue}, timeout=30).json()
    queues = {queue["name"]: queue for queue in answer["queues"]}
    assert sorted(queues) == [f"{cfg.queue}.q000{i}" for i in range(5)]
    for queue in queues.values():
        assert 1 <= queue["partitions"] <= 3
        assert queue["options"]["completedRetentionSeconds"] == 60 and queue["options"]["leaseTime"] == 30


@pytest.mark.parametrize(("transport", "processes"), [("library", False), ("library", True), ("null", False)],
                         ids=["library-one-process", "library-processes", "null"])
def test_a_run_through_the_library_counts_every_message_and_its_cpu(database_url, tmp_path, transport, processes):
    """A few seconds of load calling reginamq.Broker in the bench's processes (or calling
    nothing): pushed = popped = acked, and the CPU figures the comparison with HTTP subtracts
    are there. Correctness of the instrument, not a speed."""
    urls = " ".join(MEMBERS.get(database_url, [database_url]))
    cfg = BenchConfig(rate=500, duration=3, report=1, drain=10, partitions=20, push_batch=50,
                      consumers=2, pop_partitions=4, completed_retention=60, transport=transport,
                      library_processes=processes)
    out = tmp_path / "bench.json"
    code = asyncio.run(run_session(cfg, url=None, workers=1, database_url=urls if transport == "library" else None,
                                   data_dir=None, json_path=out, plot_path=None, live=False))
    assert code == 0
    document = json.loads(out.read_text())
    final = document["final"]
    assert final["offered"] == 500 * 3
    assert final["offered"] == final["accepted"] == final["popped"] == final["acked"]
    assert (final["shed"], final["push_err"], final["pop_err"], final["ack_err"]) == (0, 0, 0, 0)
    assert final["push_reqs"] == 500 * 3 // 50 and final["ack_reqs"] > 0
    assert final["cpu_broker"] is None  # the library runs in the generator's processes: counted there
    assert final["cpu_gen"] > 0 and final["cpu_pg"] is not None
    assert all(row["cpu_gen"] is not None for row in document["intervals"])
    if transport == "library":
        assert final["latency_samples"] == final["popped"]


@pytest.mark.parametrize("options", [{"verify": True}, {"binary_push": True}, {"per_partition": True}])
def test_what_the_library_load_does_not_do_is_refused(options):
    with pytest.raises(ValueError, match="over HTTP only"):
        BenchConfig(rate=100, transport="library", **options)
    with pytest.raises(ValueError, match="one process"):
        BenchConfig(rate=100, transport="null", library_processes=True)
    with pytest.raises(ValueError, match="--transport library"):
        BenchConfig(rate=100, library_processes=True)
