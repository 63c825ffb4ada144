"""One of three member databases stopped abruptly for ~10 s under load, then started again
(docs/shards.md, "Failure of one member"): the pushes that reach it are spooled and replayed,
the other members keep serving pops, the operator's listings answer from the members they
reach and name the one they left out, and the verifier finds nothing lost, reordered or
invented."""

from __future__ import annotations

import asyncio
import time

import pytest

from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema
from tests.conftest import stop_process
from tests.faults.helpers import REPORT_LINE, Bench, assert_clean, get, start_broker_on

OUTAGE_S = 10
MEMBERS = 3


@pytest.fixture
def member_servers(tmp_path):
    """Three PostgreSQL servers of their own, one member database each: one can be stopped."""
    servers = [EmbeddedPostgres(tmp_path / f"member{ordinal}") for ordinal in range(MEMBERS)]
    urls = [server.start() for server in servers]
    for url in urls:
        asyncio.run(apply_schema(url))
    try:
        yield servers, urls
    finally:
        for server in servers:
            if server.started_here:
                server.stop(mode="immediate")


def popped_so_far(bench: Bench) -> int:
    """The messages the bench's consumers have popped, by its last report line."""
    reports = REPORT_LINE.findall(bench.output())
    return int(reports[-1][1].replace(",", "")) if reports else 0


def test_a_member_stopped_under_load_loses_nothing_and_the_others_keep_serving(member_servers, tmp_path):
    servers, urls = member_servers
    process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log")
    bench = Bench(url, tmp_path, rate=600, duration=20, lease=2, timeout=180)
    try:
        bench.wait_for_load()
        servers[2].stop(mode="immediate")
        down_at = time.monotonic()
        popped_at_stop = popped_so_far(bench)
        # a wildcard pop of a queue answers from the members it reaches
        assert get(url, "/api/v1/pop/queue/member-outage-probe", wait="false").status_code in (200, 204)
        # so do the operator's listings, naming the member they left out
        for path in ("/api/v1/resources/queues", "/api/v1/resources/overview", "/api/v1/status/queues"):
            listing = get(url, path)
            assert listing.status_code == 200, (path, listing.text)
            assert listing.headers["x-reginamq-members-unreached"] == "2", path
        deadline = down_at + OUTAGE_S
        while time.monotonic() < deadline and popped_so_far(bench) <= popped_at_stop:
            time.sleep(0.2)
        assert popped_so_far(bench) > popped_at_stop, "nothing was popped while one member was down"
        time.sleep(max(0.0, deadline - time.monotonic()))
        servers[2].start()
        code, output, results = bench.finish()
    finally:
        bench.stop()
        stop_process(process)
    assert results["stats"].get("push_buffered", 0) > 0, results["stats"]
    assert process.returncode == 0
    assert_clean(code, output, results)
