"""The operator CLI (reginamq queue|push|pop|tail|group|dlq|status) against the real broker.

Each test drives the commands through click's CliRunner (one through a real subprocess, for
Ctrl-C) and checks both what they print (``--json`` for exact checks) and their exit codes:
0 ok, 1 user error, 2 server error or unreachable, 3 auth, 4 nothing to do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from click.testing import CliRunner

from reginamq.cli import main
from tests.conftest import PARK_SECONDS, backdate_segments, free_port, wait_until

pytestmark = pytest.mark.timeout(120)


def name(prefix: str = "ctl") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ctl(broker_url):
    """ctl(*args, input=None, url=broker_url) -> click Result (stdout and stderr kept apart)."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None, url: str | None = broker_url, env: dict | None = None):
        argv = [*args] + (["--url", url] if url is not None else [])
        return runner.invoke(main, argv, input=input, env=env, catch_exceptions=False)

    return run


@pytest.fixture
def http(broker_url):
    with httpx.Client(base_url=broker_url, timeout=30) as client:
        yield client


def lines(result) -> list:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def ndjson(*values) -> str:
    return "".join(json.dumps(v) + "\n" for v in values)


def push_http(http: httpx.Client, queue: str, payloads: list, partition: str = "p") -> None:
    response = http.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "payload": p} for p in payloads]})
    assert response.status_code == 201, response.text


# --- push / pop ----------------------------------------------------------------------------------

def test_push_ndjson_payloads_and_envelopes_then_pop(ctl):
    queue = name()
    text = (ndjson({"n": 1, "customer": "alice"}, {"n": 2, "customer": "bob"})
            + "\n"  # blank lines are skipped
            + ndjson({"payload": {"n": 3}, "partition": "carol", "transactionId": "tx-3"},
                     {"n": 4, "customer": "alice"}, 5))
    result = ctl("push", "--queue", queue, "--partition-key", "customer", "--partition", "other",
                 "--batch", "2", "--json", input=text)
    assert result.exit_code == 0, result.output
    pushed = lines(result)
    assert [p["line"] for p in pushed] == [1, 2, 4, 5, 6]
    # the envelope's partition wins, then --partition-key, then --partition (a payload without the field)
    assert [p["partition"] for p in pushed] == ["alice", "bob", "carol", "alice", "other"]
    assert {p["status"] for p in pushed} == {"queued"}
    assert pushed[2]["transactionId"] == "tx-3"
    assert all(p["messageId"] and p["queue"] == queue for p in pushed)
    alice = ctl("pop", "-q", queue, "-p", "alice", "-n", "10", "--data-only")
    assert lines(alice) == [{"n": 1, "customer": "alice"}, {"n": 4, "customer": "alice"}]
    carol = ctl("pop", "-q", queue, "-p", "carol", "--json")
    assert [(m["data"], m["transactionId"]) for m in lines(carol)] == [({"n": 3}, "tx-3")]


def test_pop_prints_json_lines_acks_and_exits_4_when_empty(ctl):
    queue = name()
    assert ctl("push", "-q", queue, "-p", "one", input=ndjson({"n": 1}, {"n": 2}, {"n": 3})).exit_code == 0
    first = ctl("pop", "-q", queue, "--batch", "2", "--json")
    assert first.exit_code == 0, first.output
    messages = lines(first)
    assert [m["data"] for m in messages] == [{"n": 1}, {"n": 2}]
    assert all(m["partition"] == "one" and m["leaseId"] and m["transactionId"] for m in messages)
    rest = ctl("pop", "-q", queue, "--batch", "10", "--data-only")
    assert rest.exit_code == 0 and lines(rest) == [{"n": 3}]
    empty = ctl("pop", "-q", queue)
    assert empty.exit_code == 4 and empty.stdout == ""
    assert "no message" in empty.stderr


def test_pop_no_ack_leaves_the_message_leased(ctl):
    queue = name()
    ctl("push", "-q", queue, input=ndjson("hello"))
    leased = ctl("pop", "-q", queue, "-g", "readers", "--no-ack", "--subscription-mode", "all")
    assert leased.exit_code == 0 and lines(leased)[0]["data"] == "hello"
    assert lines(leased)[0]["consumerGroup"] == "readers"
    assert ctl("pop", "-q", queue, "-g", "readers").exit_code == 4  # still leased
    # every group sees every message (one new to the queue, when it asks for the backlog)
    assert ctl("pop", "-q", queue, "-g", "others", "--subscription-mode", "all").exit_code == 0
    assert ctl("pop", "-q", queue, "-g", "latecomers").exit_code == 4  # the broker's default: new


def test_pop_wait_long_polls(ctl, http):
    queue = name()
    threading.Timer(0.5, push_http, (http, queue, ["late"])).start()
    started = time.monotonic()
    result = ctl("pop", "-q", queue, "--wait", "10", "--data-only")
    assert result.exit_code == 0 and lines(result) == ["late"]
    assert time.monotonic() - started < 8


def test_push_errors_and_nothing_to_push(ctl):
    queue = name()
    missing = ctl("push", "-q", queue, "--partition-key", "customer",
                  input=ndjson({"customer": "a"}, {"other": 1}))
    assert missing.exit_code == 1 and "line 2" in missing.stderr and "customer" in missing.stderr
    bad = ctl("push", "-q", queue, input='{"n": 1}\nnot json\n')
    assert bad.exit_code == 1 and "line 2: not JSON" in bad.stderr
    assert ctl("push", "-q", queue, input="").exit_code == 4
    assert ctl("push", "-q", queue, input="\n  \n").exit_code == 4
    assert ctl("push", input="1\n").exit_code == 1  # --queue is required: a usage error is 1, not click's 2
    refused = ctl("push", "-q", "bad/name", input="1\n")  # the broker's 400
    assert refused.exit_code == 1 and "400" in refused.stderr
    envelope = ctl("push", "-q", queue, "--format", "envelope", input=ndjson({"n": 1}))
    assert envelope.exit_code == 1 and "payload" in envelope.stderr
    # --format payload takes an envelope-looking line literally
    literal = ctl("push", "-q", queue, "--format", "payload", input=ndjson({"payload": 1}))
    assert literal.exit_code == 0
    # nothing of the refused inputs was pushed (each failed before its first batch was sent)
    assert lines(ctl("pop", "-q", queue, "-n", "10", "--partitions", "10", "--data-only")) == [{"payload": 1}]


def test_push_reports_duplicates_and_nested_partition_keys(ctl):
    queue = name()
    text = ndjson({"payload": {"o": {"id": 7}}, "transactionId": "t1"},
                  {"payload": {"o": {"id": 7}}, "transactionId": "t1"})
    result = ctl("push", "-q", queue, "--partition-key", "o.id", "--json", input=text)
    assert result.exit_code == 0
    assert [(p["partition"], p["status"]) for p in lines(result)] == [("7", "queued"), ("7", "duplicate")]
    summary = ctl("push", "-q", queue, "--partition-key", "o.id", input=text)
    assert summary.exit_code == 0 and "2 duplicate" in summary.stderr


# --- tail ----------------------------------------------------------------------------------------

def test_tail_reads_as_a_group_and_stops_when_told(ctl):
    queue = name()
    ctl("push", "-q", queue, "-p", "a", input=ndjson(*range(5)))
    first = ctl("tail", "-q", queue, "-g", "t", "--max-messages", "3", "--batch", "2", "--data-only")
    assert first.exit_code == 0 and lines(first) == [0, 1, 2]
    # without -f: drain what is there, then stop
    rest = ctl("tail", "-q", queue, "-g", "t", "--json")
    assert rest.exit_code == 0 and [m["data"] for m in lines(rest)] == [3, 4]
    assert ctl("tail", "-q", queue, "-g", "t").exit_code == 4  # the group has read everything (acked)
    started = time.monotonic()
    idle = ctl("tail", "-f", "-q", queue, "-g", "t", "--duration", "1")
    assert idle.exit_code == 4 and 0.9 <= time.monotonic() - started < 10


def test_tail_follow_wakes_on_new_messages(ctl, http):
    queue = name()
    push_http(http, queue, ["before"])
    # -f: a group new to the queue follows what is pushed from its first pop on
    assert ctl("tail", "-f", "-q", queue, "-g", "f", "--duration", "0.3").exit_code == 4
    threading.Timer(0.5, push_http, (http, queue, ["x", "y"])).start()
    started = time.monotonic()
    result = ctl("tail", "-f", "-q", queue, "-g", "f", "--max-messages", "2", "--duration", "20", "--data-only")
    assert result.exit_code == 0 and lines(result) == ["x", "y"]
    assert time.monotonic() - started < 10


def test_tail_stops_cleanly_on_ctrl_c(broker_url, http, ctl):
    queue = name()
    push_http(http, queue, ["first"])
    process = subprocess.Popen(
        [sys.executable, "-m", "reginamq", "tail", "-f", "-q", queue, "-g", "cc", "--data-only",
         "--subscription-mode", "all", "--url", broker_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert json.loads(process.stdout.readline()) == "first"

        def acked() -> bool:  # printed, then acked: next comes the long poll
            detail = http.get("/api/v1/consumer-groups/cc").json()
            return [p["offsetLag"] for p in detail.get(queue, {}).get("partitions", [])] == [0]

        assert wait_until(acked)
        time.sleep(PARK_SECONDS)  # into its long poll: nothing outside shows that
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped after 1 message" in err and "Traceback" not in err
    assert ctl("pop", "-q", queue, "-g", "cc").exit_code == 4  # the printed message was acked


# --- queues --------------------------------------------------------------------------------------

def test_queue_configure_list_show_delete(ctl):
    queue = name("cfg")
    configured = ctl("queue", "configure", queue, "-s", "leaseTime=30", "-s", "deadLetterQueue=false",
                     "--options", '{"retryLimit": 2}', "--json")
    assert configured.exit_code == 0, configured.output
    options = json.loads(configured.stdout)["options"]
    assert (options["leaseTime"], options["deadLetterQueue"], options["retryLimit"]) == (30, False, 2)
    merged = json.loads(ctl("queue", "configure", queue, "-s", "ttl=60", "--json").stdout)["options"]
    assert (merged["leaseTime"], merged["ttl"]) == (30, 60)
    replaced = json.loads(ctl("queue", "configure", queue, "--replace", "-s", "ttl=61", "--json").stdout)
    assert replaced["options"]["leaseTime"] == 300 and replaced["options"]["ttl"] == 61

    bad = ctl("queue", "configure", queue, "-s", "leaseTiem=3")
    assert bad.exit_code == 1 and "leaseTiem" in bad.stderr
    assert ctl("queue", "configure", queue, "-s", "novalue").exit_code == 1
    assert ctl("queue", "configure", queue, "--options", "[1]").exit_code == 1

    ctl("push", "-q", queue, "-p", "p1", input=ndjson(1, 2))
    listed = ctl("queue", "list", "--search", queue, "--json")
    assert listed.exit_code == 0
    (entry,) = json.loads(listed.stdout)["queues"]
    assert (entry["name"], entry["messages"], entry["partitions"]) == (queue, 2, 1)
    table = ctl("queue", "list", "--search", queue)
    assert table.exit_code == 0 and queue in table.stdout and "pending" in table.stdout
    assert ctl("queue", "list", "--search", name("none")).exit_code == 0  # an empty list is an answer

    shown = ctl("queue", "show", queue, "--json")
    assert shown.exit_code == 0
    body = json.loads(shown.stdout)
    assert body["name"] == queue and [p["name"] for p in body["partitions"]] == ["p1"]
    human = ctl("queue", "show", queue)
    assert human.exit_code == 0 and "p1" in human.stdout and "ttl" in human.stdout
    unknown = ctl("queue", "show", name("none"))
    assert unknown.exit_code == 1 and "404" in unknown.stderr

    aborted = ctl("queue", "delete", queue, input="n\n")
    assert aborted.exit_code == 1  # not confirmed: nothing deleted
    assert ctl("queue", "show", queue).exit_code == 0
    deleted = ctl("queue", "delete", queue, "--yes", "--json")
    assert deleted.exit_code == 0 and json.loads(deleted.stdout)["deleted"] is True
    again = ctl("queue", "delete", queue, "-y")
    assert again.exit_code == 4 and "nothing deleted" in again.stderr
    assert ctl("queue", "show", queue).exit_code == 1


async def test_queue_list_and_show_count_messages_expired_by_a_ttl(ctl, db):
    queue = name("ttl")
    assert ctl("queue", "configure", queue, "-s", "ttl=600").exit_code == 0
    ctl("push", "-q", queue, input=ndjson("stale-1", "stale-2"))
    await backdate_segments(db, queue, 7200)
    ctl("push", "-q", queue, input=ndjson("fresh"))
    assert lines(ctl("pop", "-q", queue, "-n", "10", "--data-only")) == ["fresh"]

    (entry,) = json.loads(ctl("queue", "list", "--search", queue, "--json").stdout)["queues"]
    assert entry["expired"] == 2
    table = ctl("queue", "list", "--search", queue)
    assert table.exit_code == 0 and "expired" in table.stdout
    assert json.loads(ctl("queue", "show", queue, "--json").stdout)["expired"] == 2
    assert "expired" in ctl("queue", "show", queue).stdout


# --- groups --------------------------------------------------------------------------------------

def test_group_list_lag_seek_delete(ctl):
    queue, group = name(), name("g")
    ctl("push", "-q", queue, "-p", "p", input=ndjson(1, 2, 3))
    assert ctl("pop", "-q", queue, "-g", group, "--subscription-mode", "all").exit_code == 0

    listed = ctl("group", "list", "--queue", queue, "--json")
    assert listed.exit_code == 0
    (entry,) = json.loads(listed.stdout)
    assert (entry["name"], entry["queueName"], entry["totalLag"]) == (group, queue, 2)
    table = ctl("group", "list", "-q", queue)
    assert table.exit_code == 0 and group in table.stdout

    lagging = ctl("group", "lag", "--queue", queue, "--json")
    assert lagging.exit_code == 0 and [g["name"] for g in json.loads(lagging.stdout)] == [group]
    detail = ctl("group", "lag", group, "--json")
    assert detail.exit_code == 0
    assert [(p["partition"], p["offsetLag"]) for p in json.loads(detail.stdout)[queue]["partitions"]] == [("p", 2)]
    human = ctl("group", "lag", group)
    assert human.exit_code == 0 and queue in human.stdout
    nobody = ctl("group", "lag", name("nobody"))
    assert nobody.exit_code == 1 and "does not read any queue" in nobody.stderr

    to_end = ctl("group", "seek", group, "-q", queue, "--to-end", "--json")
    assert to_end.exit_code == 0 and json.loads(to_end.stdout)["partitionsUpdated"] == 1
    assert json.loads(ctl("group", "lag", group, "--json").stdout)[queue]["totalLag"] == 0
    rewind = ctl("group", "seek", group, "-q", queue, "--to", "2000-01-01T00:00:00")
    assert rewind.exit_code == 0 and "1 partition(s) moved" in rewind.stderr
    assert json.loads(ctl("group", "lag", group, "--json").stdout)[queue]["totalLag"] == 3
    assert ctl("group", "seek", group, "-q", queue).exit_code == 1  # neither --to-end nor --to
    assert ctl("group", "seek", group, "-q", queue, "--to-end", "--to", "now").exit_code == 1
    assert ctl("group", "seek", name("nobody"), "-q", queue, "--to-end").exit_code == 1  # 404

    deleted = ctl("group", "delete", group, "-q", queue, "--yes", "--json")
    assert deleted.exit_code == 0 and json.loads(deleted.stdout)["deleted"] is True
    assert ctl("group", "delete", group, "--yes").exit_code == 4
    assert ctl("group", "list", "-q", queue, "--json").stdout.strip() == "[]"


def test_a_conflating_group_says_so_in_the_group_tables(ctl, http):
    queue, group = name(), name("g")
    push_http(http, queue, [1, 2, 3])
    popped = http.get(f"/api/v1/pop/queue/{queue}", params={"consumerGroup": group, "conflation": "true",
                                                            "subscriptionMode": "all"})
    assert popped.status_code == 200 and [m["data"] for m in popped.json()["messages"]] == [3]

    listed = ctl("group", "list", "-q", queue)
    assert listed.exit_code == 0 and "all, last value" in listed.stdout
    detail = ctl("group", "lag", group)
    assert detail.exit_code == 0 and "all, last value" in detail.stdout


# --- dead letters --------------------------------------------------------------------------------

def dead_letters(http: httpx.Client, queue: str, group: str, payloads: list) -> None:
    push_http(http, queue, payloads)
    response = http.get(f"/api/v1/pop/queue/{queue}",
                        params={"consumerGroup": group, "subscriptionMode": "all", "batch": len(payloads)})
    messages = response.json()["messages"]
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "dlq", "error": "boom"} for m in messages]
    answer = http.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": group})
    assert all(r["success"] for r in answer.json()), answer.text


def test_dlq_list_replay_purge(ctl, http):
    queue, group = name(), name("g")
    dead_letters(http, queue, group, [{"n": 1}, {"n": 2}, {"n": 3}])

    listed = ctl("dlq", "list", "-q", queue, "--json")
    assert listed.exit_code == 0
    body = json.loads(listed.stdout)
    assert body["total"] == 3
    assert sorted(m["data"]["n"] for m in body["messages"]) == [1, 2, 3]
    assert {(m["consumerGroup"], m["errorMessage"]) for m in body["messages"]} == {(group, "boom")}
    table = ctl("dlq", "list", "-q", queue)
    assert table.exit_code == 0 and "boom" in table.stdout and body["messages"][0]["id"] in table.stdout

    entry = body["messages"][0]
    replayed = ctl("dlq", "replay", entry["id"], "--json")
    assert replayed.exit_code == 0
    answer = json.loads(replayed.stdout)
    assert [r["id"] for r in answer["replayed"]] == [entry["id"]] and answer["missing"] == []
    again = ctl("dlq", "replay", entry["id"])
    assert again.exit_code == 4 and "no dead letter" in again.stderr
    assert ctl("dlq", "replay", "not-a-uuid").exit_code == 1  # the broker's 400
    assert ctl("dlq", "replay").exit_code == 1  # neither ids nor --all
    assert ctl("dlq", "replay", "--all").exit_code == 1  # --all needs --queue
    back = ctl("pop", "-q", queue, "-g", group, "--data-only")
    assert back.exit_code == 0 and lines(back) == [entry["data"]]

    assert json.loads(ctl("dlq", "list", "-q", queue, "--json").stdout)["total"] == 2
    purged = ctl("dlq", "purge", "-q", queue, "-g", group, "--yes", "--json")
    assert purged.exit_code == 0 and json.loads(purged.stdout)["deleted"] == 2
    assert ctl("dlq", "purge", "-q", queue, "--yes").exit_code == 4
    empty = ctl("dlq", "list", "-q", queue, "--json")
    assert empty.exit_code == 0 and json.loads(empty.stdout)["total"] == 0  # an empty list exits 0
    assert ctl("dlq", "list").exit_code == 1  # --queue is required


def test_dlq_replay_all(ctl, http):
    queue, group = name(), name("g")
    dead_letters(http, queue, group, ["a", "b"])
    result = ctl("dlq", "replay", "--all", "-q", queue, "--json")
    assert result.exit_code == 0 and len(json.loads(result.stdout)["replayed"]) == 2
    assert json.loads(ctl("dlq", "list", "-q", queue, "--json").stdout)["total"] == 0
    assert ctl("dlq", "replay", "--all", "-q", queue).exit_code == 4
    assert sorted(lines(ctl("pop", "-q", queue, "-g", group, "-n", "5", "--data-only"))) == ["a", "b"]


# --- status and exit codes -----------------------------------------------------------------------

def test_status(ctl):
    ctl("push", "-q", name(), input=ndjson(1))
    result = ctl("status", "--json")
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert body["health"]["status"] == "healthy"
    assert body["status"]["queues"] >= 1 and "totals" in body["status"]
    assert body["queues"]["total"] >= 1
    [database] = body["status"]["databases"]
    human = ctl("status")
    assert human.exit_code == 0 and "healthy" in human.stdout and "Queues" in human.stdout
    assert "Databases" in human.stdout and database["id"] in human.stdout


def test_url_from_the_environment(ctl, broker_url):
    result = ctl("status", "--json", "--no-queues", url=None, env={"REGINAMQ_URL": broker_url})
    assert result.exit_code == 0 and json.loads(result.stdout)["url"] == broker_url


def test_unreachable_broker_exits_2(ctl):
    dead = f"http://127.0.0.1:{free_port()}"
    for args in (["status"], ["queue", "list"], ["pop", "-q", "x"], ["dlq", "list", "-q", "x"],
                 ["group", "list"]):
        result = ctl(*args, url=dead)
        assert result.exit_code == 2, (args, result.output)
        assert "cannot reach the broker" in result.stderr


class _Stub(BaseHTTPRequestHandler):
    """Answers every request with the status in the path's first segment (e.g. /401/...)."""

    def _answer(self):
        status = int(self.server.status)
        body = json.dumps({"error": f"stub {status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("status", "code"), [(401, 3), (403, 3), (500, 2), (503, 2), (404, 1), (409, 1)])
def test_http_status_classes_map_to_exit_codes(ctl, stub, status, code):
    stub.status = status
    url = f"http://127.0.0.1:{stub.server_address[1]}"
    result = ctl("queue", "list", url=url)
    assert result.exit_code == code
    assert f"stub {status}" in result.stderr


def test_bearer_token_is_sent(stub, ctl):
    seen = {}

    class Recorder(_Stub):
        def _answer(self):
            seen["auth"] = self.headers.get("Authorization")
            super()._answer()

        do_GET = _answer

    stub.RequestHandlerClass = Recorder
    stub.status = 401
    url = f"http://127.0.0.1:{stub.server_address[1]}"
    result = ctl("group", "list", "--token", "s3cret", url=url)
    assert result.exit_code == 3 and seen["auth"] == "Bearer s3cret"


def test_usage_errors_exit_1(ctl):
    assert ctl("queue", "bogus", url=None).exit_code == 1
    assert ctl("queue", "list", "--limit", "0").exit_code == 1
    assert ctl("pop", "-q", "x", "--batch", "abc").exit_code == 1
    assert ctl("queue", "--help", url=None).exit_code == 0


def test_subprocess_entry_point(broker_url):
    env = {**os.environ, "REGINAMQ_URL": broker_url}
    queue = name()
    pushed = subprocess.run([sys.executable, "-m", "reginamq", "push", "-q", queue], input="1\n2\n",
                            capture_output=True, text=True, env=env, timeout=60)
    assert pushed.returncode == 0, pushed.stderr
    popped = subprocess.run([sys.executable, "-m", "reginamq", "pop", "-q", queue, "-n", "5", "--data-only"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert popped.returncode == 0 and popped.stdout.split() == ["1", "2"]
