"""A member database added under load (`reginamq shards add`, docs/shards.md "Adding a
member"), then idle partitions moved onto it under the same load (`reginamq shards rebalance`,
"Rebalancing"): the broker serves the new member without a restart while a verified bench runs,
pushes and pops follow the partitions that move, the bench finds nothing lost, reordered or
invented, new partitions take their share of the new member, and once the load stops a last
rebalance leaves every partition where placement puts it."""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

import httpx

from reginamq.store.members import place
from tests.conftest import create_database, stop_process, wait_until
from tests.faults.helpers import (
    Bench,
    assert_clean,
    form_deployment,
    listening_on,
    partitions_on,
    query,
    shards,
    shards_add,
    start_broker_on,
)


def moved(rebalanced: subprocess.CompletedProcess) -> int:
    assert rebalanced.returncode == 0, rebalanced.stderr
    return int(re.search(r"^moved (\d+) partition", rebalanced.stdout, re.MULTILINE).group(1))


def homes(urls: list[str]) -> dict[tuple[str, str], list[int]]:
    """Every partition of the deployment, by (queue, name), with the members holding it."""
    held: dict[tuple[str, str], list[int]] = defaultdict(list)
    for ordinal, member in enumerate(urls):
        for queue, name in query(member, "SELECT q.name, p.name FROM rq_partitions p "
                                         "JOIN rq_queues q ON q.id = p.queue_id"):
            held[queue, name].append(ordinal)
    return held


def test_a_member_added_and_rebalanced_under_load_loses_nothing(database_url, tmp_path):
    urls = [create_database(database_url, "added_under_load") for _ in range(3)]
    form_deployment(urls[:2])
    process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log")
    bench = Bench(url, tmp_path, rate=600, duration=25, lease=2, timeout=200)
    try:
        bench.wait_for_load()
        added = shards_add(urls[2], urls[:2])
        assert added.returncode == 0, added.stderr
        wait_until(lambda: listening_on(urls[2]) >= 2, seconds=30)
        moved_under_load = sum(moved(shards("rebalance", urls, "--idle-seconds", "0", "--batch", "4"))
                               for _ in range(3))
        assert bench.process.poll() is None, "the load ended before the rebalances did"
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
    assert moved_under_load > 0, "no partition was idle for a moment under the load"
    assert partitions_on(urls[2], "after-the-add"), "the new member took no new partition"
    moved(shards("rebalance", urls, "--idle-seconds", "0"))
    ids = [row[0] for row in query(urls[0], "SELECT id FROM rq_members ORDER BY ordinal")]
    held = homes(urls)
    assert all(len(members) == 1 for members in held.values()), held
    assert {name: members[0] for name, members in held.items()} == {name: place(*name, ids) for name in held}
