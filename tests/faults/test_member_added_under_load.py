"""A member database added under load (`reginamq shards add`, docs/shards.md "Adding a
member"): the broker serves it without a restart while a verified bench runs, the bench finds
nothing lost, reordered or invented, and new partitions take their share of the new member."""

from __future__ import annotations

import httpx

from tests.conftest import create_database, stop_process, wait_until
from tests.faults.helpers import (
    Bench,
    assert_clean,
    form_deployment,
    listening_on,
    partitions_on,
    shards_add,
    start_broker_on,
)


def test_a_member_added_under_load_loses_nothing(database_url, tmp_path):
    urls = [create_database(database_url, "added_under_load") for _ in range(3)]
    form_deployment(urls[:2])
    process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log")
    bench = Bench(url, tmp_path, rate=600, duration=15, lease=2, timeout=180)
    try:
        bench.wait_for_load()
        added = shards_add(urls[2], urls[:2])
        assert added.returncode == 0, added.stderr
        wait_until(lambda: listening_on(urls[2]) >= 2, seconds=30)
        code, output, results = bench.finish()
        with httpx.Client(base_url=url, timeout=30) as http:
            answer = http.post("/api/v1/push", json={"items": [{"queue": "after-the-add", "partition": f"p{n}",
                                                                "payload": n} for n in range(30)]})
            assert answer.status_code == 201, answer.text
    finally:
        bench.stop()
        stop_process(process)
    assert process.returncode == 0
    assert_clean(code, output, results)
    assert partitions_on(urls[2], "after-the-add"), "the new member took no new partition"
