"""Shared by the fault tests: a broker on a chosen port, a verified bench run in the
background, and the counters it printed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from tests.conftest import free_port, query, remember_database, spool_dir, wait_healthy, wait_until

# An interval line of the bench's report: cumulative counts so far.
REPORT_LINE = re.compile(r"^\[\s*\d+s[ *]\] offered=\S+ accepted=([\d,]+) shed=\S+ popped=([\d,]+) ", re.M)
# granian gives up on the whole broker ("Worker crash loop detected") when a worker dies within
# 5.5 s of being respawned: a worker is killed only once it has lived longer than this.
RESPAWN_GRACE_S = 6.0


def start_broker_on(database_url: str, port: int | None = None, workers: int = 2, spool: str | None = None,
                    log_path: Path | None = None, extra_env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """``reginamq serve`` on 127.0.0.1:port (a restart can reuse the port and the spool)."""
    port = port or free_port()
    env = {**os.environ, "REGINAMQ_DATABASE_URL": database_url, "REGINAMQ_MAINTENANCE_INTERVAL": "0.3",
           "REGINAMQ_SPOOL_DIR": spool or spool_dir(), **(extra_env or {})}
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "reginamq", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process)
    remember_database(process, database_url)
    return process, url


class Bench:
    """``reginamq bench --url URL --verify`` running in a child process while a test injects faults."""

    def __init__(self, url: str, tmp_path: Path, *args: str, rate: int = 2000, duration: float = 10,
                 lease: int = 2, timeout: float = 120):
        self.json_path = tmp_path / "bench.json"
        self.out_path = tmp_path / "bench.out"
        self.timeout = timeout
        command = [sys.executable, "-m", "reginamq", "bench", "--url", url, "--verify", "--rate", str(rate),
                   "--duration", str(duration), "--report", "1", "--lease-seconds", str(lease),
                   "--drain", "40", "--push-batch", "10", "--pop-batch", "100", "--partitions", "50",
                   "--producer-procs", "1", "--consumer-procs", "1", "--json", str(self.json_path), *args]
        env = {key: value for key, value in os.environ.items() if not key.startswith("REGINAMQ_")}
        self._out = open(self.out_path, "wb")  # noqa: SIM115
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT, env=env)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def wait_for_load(self, seconds: float = 30.0) -> None:
        """Poll the bench's report until it shows messages accepted and popped: the load runs."""
        def running() -> bool:
            return any(accepted != "0" and popped != "0"
                       for accepted, popped in REPORT_LINE.findall(self.output()))

        assert wait_until(running, seconds, interval=0.2), f"no load after {seconds} s:\n{self.output()[-3000:]}"

    def finish(self) -> tuple[int, str, dict]:
        """Wait for the run; (exit code, output, the --json document's verify results)."""
        try:
            code = self.process.wait(max(1.0, self.timeout - self.elapsed()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the bench did not end in {self.timeout:.0f} s:\n{self.output()[-3000:]}") from None
        finally:
            self._out.close()
        output = self.output()
        assert self.json_path.exists(), output[-4000:]
        final = json.loads(self.json_path.read_text())["final"]
        return code, output, final["verify"]

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._out.closed:
            self._out.close()


def workers_of(pid: int) -> list[psutil.Process]:
    """The broker's live workers: a killed one stays a zombie child until granian reaps it."""
    workers = []
    for child in psutil.Process(pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                workers.append(child)
        except psutil.NoSuchProcess:
            pass
    return workers


def kill_the_older_worker(process: subprocess.Popen, seconds: float = 30.0) -> int:
    """SIGKILL the older of the broker's two workers, once both are up and it has lived past
    ``RESPAWN_GRACE_S``; returns its pid. Killing the older one alternates between the two."""
    def victim() -> psutil.Process | None:
        workers = workers_of(process.pid)
        if len(workers) < 2:
            return None  # granian is respawning
        older = min(workers, key=lambda worker: worker.create_time())
        return older if time.time() - older.create_time() > RESPAWN_GRACE_S else None

    older = wait_until(victim, seconds, interval=0.1)
    assert older is not None, f"the broker did not have two workers, one {RESPAWN_GRACE_S} s old, within {seconds} s"
    os.kill(older.pid, signal.SIGKILL)  # a worker of the broker this test started
    # the signal lands asynchronously: until the victim is a zombie it still counts as a live worker
    def gone() -> bool:
        return older.pid not in {worker.pid for worker in workers_of(process.pid)}

    assert wait_until(gone, seconds, interval=0.02)
    return older.pid


def totals(results: dict) -> dict:
    keys = ("accepted", "delivered", "lost", "duplicates", "dup_lease", "dup_failed_ack", "dup_other", "reordered",
            "phantoms", "redelivered_elsewhere", "unconfirmed_delivered")
    return {key: sum(group[key] for group in results["groups"].values()) for key in keys}


def assert_clean(code: int, output: str, results: dict) -> dict:
    """0 lost, 0 reordered, 0 phantoms, every duplicate explained; returns the totals."""
    counts = totals(results)
    verdict = output.strip().splitlines()[-1]
    print(verdict, json.dumps(counts), json.dumps(results["stats"]))  # shown with pytest -s / on failure
    assert counts["accepted"] > 0, output[-4000:]
    assert (counts["lost"], counts["reordered"], counts["phantoms"], counts["dup_other"]) == (0, 0, 0, 0), \
        output[-6000:]
    assert code == 0 and verdict.startswith("[verify OK]"), output[-4000:]
    return counts


def get(url: str, path: str, **params) -> httpx.Response:
    return httpx.get(f"{url}{path}", params=params, timeout=10)


def listening_on(url: str) -> int:
    """How many connections LISTEN on the database at ``url``: one per broker process that serves it."""
    return query(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND query LIKE 'LISTEN%'")[0][0]


def partitions_on(url: str, queue: str) -> set[str]:
    """The names of ``queue``'s partitions the member database at ``url`` holds."""
    return {row[0] for row in query(url, "SELECT p.name FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                         "WHERE q.name = $1", queue)}


def form_deployment(urls: list[str]) -> None:
    """Forms the deployment of the member databases ``urls`` (as `reginamq serve` given them does)."""
    formed = subprocess.run([sys.executable, "-c", "import asyncio, sys; from reginamq.store.members import "
                             "check_deployment; asyncio.run(check_deployment(sys.argv[1:]))", *urls], timeout=60)
    assert formed.returncode == 0


def shards(command: str, members: list[str], *arguments: str) -> subprocess.CompletedProcess:
    """`reginamq shards COMMAND ARGUMENTS --database-url ...` for the deployment of ``members``."""
    flags = [flag for url in members for flag in ("--database-url", url)]
    return subprocess.run([sys.executable, "-m", "reginamq", "shards", command, *arguments, *flags],
                          capture_output=True, text=True, timeout=120)


def shards_add(new_url: str, members: list[str]) -> subprocess.CompletedProcess:
    """`reginamq shards add new_url --database-url ...` for the deployment of ``members``."""
    return shards("add", members, new_url)
