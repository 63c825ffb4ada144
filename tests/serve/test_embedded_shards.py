"""`reginamq serve --shards N`, started again with a larger N: the new embedded servers join
the deployment (store/members.py check_deployment), everything that existed stays where it was
and new partitions take their share of the new member; a smaller N is refused, naming the
mismatch, and starts nothing."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx

from reginamq.store.embedded import EmbeddedPostgres, shard_data_dir
from tests.conftest import free_port
from tests.faults.helpers import partitions_on, query
from tests.serve.test_serve import serve_embedded, without_broker_settings


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0


def test_serve_with_more_shards_adds_the_new_servers_and_a_smaller_count_is_refused(tmp_path):
    data_dir, port = tmp_path / "pgdata", free_port()
    url = f"http://127.0.0.1:{port}"
    process = serve_embedded(data_dir, port, "--shards", "2", "--workers", "1")
    try:
        before = [f"old-{n}" for n in range(30)]
        answer = httpx.post(f"{url}/api/v1/push", json={"items": [
            {"queue": "grow", "partition": name, "payload": name} for name in before]})
        assert answer.status_code == 201, answer.text
    finally:
        stop(process)

    process = serve_embedded(data_dir, port, "--shards", "3", "--workers", "1")
    try:
        urls = [EmbeddedPostgres(shard_data_dir(data_dir, shard)).url for shard in range(3)]
        assert [row[0] for row in query(urls[2], "SELECT ordinal FROM rq_members ORDER BY ordinal")] == [0, 1, 2]
        assert partitions_on(urls[2], "grow") == set(), "nothing that existed moved"
        after = [f"new-{n}" for n in range(60)]
        answer = httpx.post(f"{url}/api/v1/push", json={"items": [
            {"queue": "grow", "partition": name, "payload": name} for name in after]})
        assert answer.status_code == 201, answer.text
        assert partitions_on(urls[2], "grow"), "new partitions take their share of the new member"
        assert set().union(*(partitions_on(member, "grow") for member in urls)) == set(before + after)
        popped = httpx.get(f"{url}/api/v1/pop/queue/grow/partition/old-0", params={"batch": 5})
        assert [message["data"] for message in popped.json()["messages"]] == ["old-0"]
    finally:
        stop(process)

    refused = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--port", str(free_port()),
                              "--data-dir", str(data_dir), "--shards", "2"],
                             env=without_broker_settings(), capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "the deployment has 3 member databases and 2 were given" in refused.stderr, refused.stderr
    assert not (shard_data_dir(data_dir, 1) / "postmaster.pid").exists(), "the refused start left a server running"
