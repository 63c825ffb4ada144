"""SIGTERM during load: parked long polls answer 204, the broker exits 0, and after a restart on
the same port nothing that was acknowledged is lost."""

from __future__ import annotations

import signal
import threading
import time

import httpx

from tests.conftest import free_port, spool_dir, stop_process
from tests.faults.helpers import Bench, assert_clean, start_broker_on


def test_sigterm_during_load_then_restart(database_url, tmp_path):
    port = free_port()
    spool = spool_dir()
    log_path = tmp_path / "broker.log"
    process, url = start_broker_on(database_url, port=port, spool=spool, log_path=log_path)
    restarted = None
    bench = Bench(url, tmp_path, rate=1500, duration=10, lease=2)
    parked: dict = {}

    def long_poll() -> None:
        started = time.monotonic()
        try:
            answer = httpx.get(f"{url}/api/v1/pop/queue/sigterm-idle-{port}",
                               params={"wait": "true", "timeout": "30000"}, timeout=40)
            parked["status"] = answer.status_code
        except httpx.HTTPError as error:
            parked["error"] = repr(error)
        parked["seconds"] = time.monotonic() - started

    try:
        bench.wait_for_load()
        poller = threading.Thread(target=long_poll, daemon=True)
        poller.start()
        time.sleep(1)  # parked by now: nothing outside shows it, and a poll still on its way would be refused
        process.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        poller.join(15)
        assert parked.get("status") == 204, parked
        assert parked["seconds"] < 10, parked
        code = process.wait(40)
        exit_seconds = time.monotonic() - stopping
        assert code == 0, log_path.read_text(errors="replace")[-3000:]
        # the broker is gone: the load's pushes, pops and acks now fail and are retried
        restarted, _ = start_broker_on(database_url, port=port, spool=spool, log_path=log_path)
        code, output, results = bench.finish()
    finally:
        bench.stop()
        stop_process(process)
        if restarted is not None:
            stop_process(restarted)
    counts = assert_clean(code, output, results)
    print(f"exited 0 {exit_seconds:.1f} s after SIGTERM; long poll 204 after {parked['seconds']:.1f} s; {counts}")
