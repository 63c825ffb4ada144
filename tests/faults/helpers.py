"""Shared by the fault tests: a broker on a chosen port, a verified bench run in the
background, and the counters it printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port, spool_dir, wait_healthy


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
