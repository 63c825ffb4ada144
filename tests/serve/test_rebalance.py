"""`reginamq shards rebalance` against running brokers (docs/shards.md, "Rebalancing"): after a
member is added, a dry run says what would move and moves nothing; the rebalance moves the idle
partitions that placement puts on the new member, and only those; the brokers, whose caches
still name the old homes, push to the moved partitions on their new home without creating them
again anywhere, a pop by name finds them there, and nothing is lost."""

from __future__ import annotations

import uuid

import httpx

from reginamq.store.members import place
from tests.conftest import create_database, stop_process, wait_until
from tests.faults.helpers import (
    form_deployment,
    listening_on,
    partitions_on,
    query,
    shards,
    shards_add,
    start_broker_on,
)
from tests.serve.test_member_added import drain, push


def test_a_rebalance_moves_idle_partitions_onto_an_added_member_under_running_brokers(database_url, tmp_path):
    urls = [create_database(database_url, "rebalanced") for _ in range(3)]
    form_deployment(urls[:2])
    # the broker and the dry run read the members from a shard file
    shard_file = tmp_path / "shards"
    shard_file.write_text("# the deployment's member databases, the catalog first\n" + "\n".join(urls) + "\n")
    process, url = start_broker_on(" ".join(urls), workers=2, log_path=tmp_path / "broker.log",
                                   extra_env={"REGINAMQ_DATABASE_URL": "", "REGINAMQ_SHARD_FILE": str(shard_file)})
    queue = f"rebalanced-{uuid.uuid4().hex[:8]}"
    names = [f"p{n}" for n in range(40)]
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            push(http, queue, names)
            assert sorted(drain(http, queue, 40)) == sorted(names)
            added = shards_add(urls[2], urls[:2])
            assert added.returncode == 0, added.stderr
            wait_until(lambda: listening_on(urls[2]) >= 2, seconds=30)
            ids = [row[0] for row in query(urls[0], "SELECT id FROM rq_members ORDER BY ordinal")]
            moving = {name for name in names if place(queue, name, ids) == 2}
            assert moving, "placement put no name on the added member"

            dry = shards("rebalance", [], "--dry-run", "--idle-seconds", "0", "--shard-file", str(shard_file))
            assert dry.returncode == 0, dry.stderr
            assert f"{len(moving)} idle partition(s) would move" in dry.stdout, dry.stdout
            assert partitions_on(urls[2], queue) == set()

            done = shards("rebalance", urls, "--idle-seconds", "0", "--batch", "5")
            assert done.returncode == 0, done.stderr
            assert f"moved {len(moving)} partition(s); 0 left in place" in done.stdout, done.stdout
            assert partitions_on(urls[2], queue) == moving
            assert partitions_on(urls[0], queue) | partitions_on(urls[1], queue) == set(names) - moving

            # the brokers' caches still name the old homes of the moved partitions
            push(http, queue, sorted(moving))
            assert partitions_on(urls[2], queue) == moving
            assert (partitions_on(urls[0], queue) | partitions_on(urls[1], queue)) & moving == set()
            name = sorted(moving)[0]

            def popped_by_name() -> bool:
                answer = http.get(f"/api/v1/pop/queue/{queue}/partition/{name}",
                                  params={"wait": "false", "autoAck": "true"})
                return answer.status_code == 200 and [m["data"] for m in answer.json()["messages"]] == [name]

            wait_until(popped_by_name, seconds=30)
            assert sorted(drain(http, queue, len(moving) - 1)) == sorted(moving - {name})
            again = shards("rebalance", urls, "--idle-seconds", "0")
            assert "moved 0 partition(s)" in again.stdout, again.stdout
    finally:
        stop_process(process)
    log = (tmp_path / "broker.log").read_text(errors="replace")
    assert "Traceback" not in log and "round failed" not in log, log[-4000:]
