"""`reginamq serve` as a user runs it: embedded PostgreSQL, restarts, signals, the schema, health."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

import asyncpg
import httpx
import pytest

from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.members import home_of, number_of
from reginamq.store.schema import DatabaseUnusable, apply_schema
from tests.conftest import (
    a_round_ran,
    connection,
    create_database,
    free_port,
    start_broker,
    stop_process,
    wait_healthy,
)


def without_broker_settings() -> dict[str, str]:
    """The environment minus any database or broker setting, so `serve` runs its embedded server."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("REGINAMQ_", "PG_"))}


def serve_embedded(data_dir, port, *options):
    process = subprocess.Popen(
        [sys.executable, "-m", "reginamq", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir), *options],
        env=without_broker_settings(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_healthy(f"http://127.0.0.1:{port}", process, seconds=90)
    return process


def test_embedded_broker_keeps_messages_across_restarts_and_stops_cleanly(tmp_path):
    data_dir = tmp_path / "pgdata"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = serve_embedded(data_dir, port)
    try:
        pushed = httpx.post(f"{url}/api/v1/push", json={"items": [
            {"queue": "durable", "partition": "p", "payload": {"n": n}} for n in range(3)]})
        assert pushed.status_code == 201
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert not (data_dir / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"

        process = serve_embedded(data_dir, port, "--pg-setting", "work_mem=7MB",
                                 "--pg-setting", "log_line_prefix=%m [%p] ")
        popped = httpx.get(f"{url}/api/v1/pop/queue/durable", params={"batch": 10})
        assert popped.status_code == 200
        assert [m["data"] for m in popped.json()["messages"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert asyncio.run(server_settings(EmbeddedPostgres(data_dir).url, "work_mem", "log_line_prefix")) \
            == ["7MB", "%m [%p] "]
    finally:
        stop_process(process)


def test_a_new_database_gets_planner_statistics_once_partitions_fill_it(tmp_path):
    """Autovacuum is off here, so only the broker's maintenance can analyse: the partition
    table is analysed once it holds 1,000 rows, the cursor table (still empty) is not."""
    data_dir, port = tmp_path / "pgdata", free_port()
    url, database_url = f"http://127.0.0.1:{port}", EmbeddedPostgres(data_dir).url
    process = serve_embedded(data_dir, port, "--pg-setting", "autovacuum=off", "--maintenance-interval", "0.5")
    try:
        asyncio.run(a_stats_round_ran(database_url))  # over the empty tables
        assert asyncio.run(reltuples(database_url)) == {"rq_partitions": -1, "rq_consumers": -1}
        pushed = httpx.post(f"{url}/api/v1/push", json={"items": [
            {"queue": "fresh", "partition": f"p{n}", "payload": n} for n in range(1_200)]}, timeout=30)
        assert pushed.status_code == 201
        deadline = time.monotonic() + 20
        while (counts := asyncio.run(reltuples(database_url)))["rq_partitions"] < 0:
            assert time.monotonic() < deadline, "the partition table was never analysed"
            time.sleep(0.2)
        assert counts == {"rq_partitions": 1_200, "rq_consumers": -1}
    finally:
        stop_process(process)


async def a_stats_round_ran(url: str) -> None:
    async with connection(url) as conn:
        await a_round_ran(conn, "stats")


async def reltuples(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT relname, reltuples::int FROM pg_class "
                                "WHERE relname IN ('rq_partitions', 'rq_consumers')")
        return {row[0]: row[1] for row in rows}
    finally:
        await conn.close()


async def server_settings(url: str, *names: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetchval("SELECT current_setting($1)", name) for name in names]
    finally:
        await conn.close()


@pytest.mark.parametrize("setting", ["shared_buffers", "=4GB", "not a name=1"])
def test_a_malformed_pg_setting_is_refused_before_anything_starts(tmp_path, setting):
    result = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--data-dir", str(tmp_path / "pg"),
                             "--pg-setting", setting], capture_output=True, text=True, timeout=60,
                            env=without_broker_settings())
    assert result.returncode == 2 and "is not NAME=VALUE" in result.stderr
    assert not (tmp_path / "pg").exists()


@pytest.mark.parametrize("variable", ["REGINAMQ_DEFAULT_SUBSCRIPTION_MODE", "DEFAULT_SUBSCRIPTION_MODE"])
def test_an_unknown_default_subscription_mode_is_refused_before_anything_starts(tmp_path, variable):
    result = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--data-dir", str(tmp_path / "pg")],
                            capture_output=True, text=True, timeout=60,
                            env={**without_broker_settings(), variable: "latest"})
    assert result.returncode == 2, result.stderr
    assert f"{variable} must be all or new, not 'latest'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "pg").exists()


def test_pg_settings_are_refused_with_a_database_of_ones_own(database_url):
    result = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--database-url", database_url,
                             "--pg-setting", "work_mem=7MB"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "embedded PostgreSQL" in result.stderr


def test_sigterm_answers_open_long_polls_at_once(database_url):
    process, url = start_broker(database_url, workers=2)
    try:
        async def long_polls():
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                polls = [asyncio.create_task(client.get("/api/v1/pop/queue/never-filled",
                                                        params={"wait": "true", "timeout": 60000}))
                         for _ in range(4)]
                # parked by now: nothing outside shows it, and a poll still on its way would be refused
                await asyncio.sleep(1.0)
                started = time.monotonic()
                process.send_signal(signal.SIGTERM)
                answers = await asyncio.gather(*polls)
                return [a.status_code for a in answers], time.monotonic() - started

        statuses, waited = asyncio.run(long_polls())
        assert statuses == [204] * 4
        assert waited < 20, f"long polls were held {waited:.1f}s after SIGTERM"
        assert process.wait(30) == 0
    finally:
        stop_process(process)


async def test_schema_applies_concurrently_and_idempotently(fresh_database):
    target = fresh_database
    applied = await asyncio.gather(*(apply_schema(target) for _ in range(4)))
    assert sorted(applied) == [False, False, False, True]  # one applies, the others find it done
    assert await apply_schema(target) is False
    conn = await asyncpg.connect(target)
    try:
        tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE 'rq_%'")}
        # an older version: rq_push with another signature and return type, and the current
        # signature returning something else; an upgrade must replace both
        await conn.execute("CREATE FUNCTION rq_push(text[], text[], text[], uuid[], bytea[], jsonb, bool) "
                           "RETURNS TABLE (x int) LANGUAGE sql AS 'SELECT 1'")
        current = "rq_push(text[], text[], int[], text[], text[], uuid[], bytea[], jsonb, bool, uuid[])"
        await conn.execute(f"DROP FUNCTION {current}")
        await conn.execute(f"CREATE FUNCTION {current} "
                           "RETURNS TABLE (x int) LANGUAGE sql AS 'SELECT 1'")
        await conn.execute("UPDATE rq_schema_state SET digest = 'an older version'")
        assert await apply_schema(target) is True
        assert await conn.fetchval("SELECT count(*) FROM pg_proc WHERE proname = 'rq_push'") == 1
        returned = await conn.fetch("SELECT * FROM rq_push('{q}', '{p}', '{1}', '{t}', '{NULL}', "
                                    "ARRAY[gen_random_uuid()], ARRAY['\\x31'::bytea], '{}'::jsonb, true)")
        # the current function: a fresh push answers no duplicates, only the notice to send
        assert [(r["item"], r["original_id"]) for r in returned] == [(None, None)]
        assert returned[0]["notice"].startswith("q\n")
    finally:
        await conn.close()
    assert {"rq_queues", "rq_partitions", "rq_segments", "rq_consumers", "rq_dedup", "rq_dedup_runs", "rq_dlq",
            "rq_consumer_groups"} <= tables


PAYLOADS_COLUMN_SQL = ("SELECT attstorage::text, attcompression::text FROM pg_attribute "
                       "WHERE attrelid = 'rq_segments'::regclass AND attname = 'payloads'")
LZ4_SQL = "SELECT 'lz4' = ANY (enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"


async def test_payload_compression_is_applied_at_start_and_only_when_it_changes(fresh_database):
    """none stores new payloads uncompressed; pglz compresses them; auto is lz4 where the server
    has it, else pglz; asking for lz4 on a server without it is refused with a clear error."""
    await apply_schema(fresh_database, "none")
    conn = await asyncpg.connect(fresh_database)
    try:
        assert tuple(await conn.fetchrow(PAYLOADS_COLUMN_SQL)) == ("e", "")
        stored_at = await conn.fetchval("SELECT xmin::text FROM pg_attribute WHERE attrelid = "
                                        "'rq_segments'::regclass AND attname = 'payloads'")
        await apply_schema(fresh_database, "none")  # unchanged: the column is not altered again
        assert await conn.fetchval("SELECT xmin::text FROM pg_attribute WHERE attrelid = "
                                   "'rq_segments'::regclass AND attname = 'payloads'") == stored_at
        await apply_schema(fresh_database, "pglz")
        assert tuple(await conn.fetchrow(PAYLOADS_COLUMN_SQL)) == ("x", "p")
        has_lz4 = await conn.fetchval(LZ4_SQL)
        await apply_schema(fresh_database, "auto")
        assert tuple(await conn.fetchrow(PAYLOADS_COLUMN_SQL)) == ("x", "l" if has_lz4 else "p")
        if not has_lz4:
            with pytest.raises(DatabaseUnusable, match="built without lz4"):
                await apply_schema(fresh_database, "lz4")
            assert tuple(await conn.fetchrow(PAYLOADS_COLUMN_SQL)) == ("x", "p")  # nothing changed
    finally:
        await conn.close()


def test_an_unknown_payload_compression_is_refused_before_anything_starts(tmp_path):
    result = subprocess.run([sys.executable, "-m", "reginamq", "serve", "--data-dir", str(tmp_path / "pg")],
                            capture_output=True, text=True, timeout=60,
                            env={**without_broker_settings(), "REGINAMQ_PAYLOAD_COMPRESSION": "zstd"})
    assert result.returncode == 2, result.stderr
    assert "REGINAMQ_PAYLOAD_COMPRESSION must be one of auto, lz4, pglz, none, not 'zstd'" in result.stderr
    assert not (tmp_path / "pg").exists()


async def test_an_upgrade_keeps_stored_options_and_new_partitions_get_numbered_ids(fresh_database):
    await apply_schema(fresh_database)
    conn = await asyncpg.connect(fresh_database)
    try:
        await conn.execute("INSERT INTO rq_queues (name, options) VALUES ('set', '{\"ttl\": 3600}'),"
                           " ('chosen', '{\"ttl\": 600}')")
        await conn.execute("UPDATE rq_schema_state SET digest = 'an older version'")
        assert await apply_schema(fresh_database) is True
        ttls = dict(await conn.fetch("SELECT name, ttl_seconds FROM rq_queues"))
        assert ttls == {"set": 3600, "chosen": 600}
        # the upgrade redefined rq_new_partition_id: the partitions' default uses it again
        queue_id = await conn.fetchval("SELECT id FROM rq_queues WHERE name = 'set'")
        created = await conn.fetch("INSERT INTO rq_partitions (queue_id, name) SELECT $1, 'p' || n "
                                   "FROM generate_series(1, 3) n RETURNING id", queue_id)
        ids = [row[0] for row in created] + [row[0] for row in await conn.fetch(
            "SELECT rq_new_partition_id() FROM generate_series(1, 3)")]
        assert all(str(i).endswith("-0000-000000000000") for i in ids) and len(set(ids)) == 6
    finally:
        await conn.close()


@pytest.mark.timeout(180)
def test_an_outage_buffers_pushes_on_disk_and_replays_them_in_order(tmp_path):
    server = EmbeddedPostgres(tmp_path / "pgdata")
    database_url = server.start()
    asyncio.run(apply_schema(database_url))
    process, url = start_broker(database_url, workers=1)
    try:
        assert httpx.post(f"{url}/api/v1/push", json={"items": [{"queue": "h", "payload": 1}]}).status_code == 201
        server.stop(mode="immediate")
        assert httpx.get(f"{url}/health", timeout=30).status_code == 503
        during = httpx.post(f"{url}/api/v1/push", timeout=30, json={"items": [
            {"queue": "h", "payload": 2, "transactionId": "during-2"},
            {"queue": "h", "payload": 3, "transactionId": "during-3"}]})
        assert during.status_code == 201
        assert [item["status"] for item in during.json()] == ["buffered", "buffered"]
        popped_during = httpx.get(f"{url}/api/v1/pop/queue/h", timeout=30)
        assert popped_during.status_code == 503 and "error" in popped_during.json()
        scrape = httpx.get(f"{url}/metrics/prometheus", timeout=30)  # monitoring sees the outage
        assert scrape.status_code == 200 and "reginamq_database_up 0.0" in scrape.text
        assert re.search(r"^reginamq_spool_waiting_bytes [1-9]", scrape.text, re.M)
        assert re.search(r"^reginamq_spool_buffered_messages\{pid=\"\d+\"\} 2\.0$", scrape.text, re.M)
        server.start()
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/health", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, "the broker did not reconnect"
            time.sleep(0.2)
        after = httpx.post(f"{url}/api/v1/push", json={"items": [{"queue": "h", "payload": 4}]}, timeout=30)
        assert after.status_code == 201
        seen: list = []
        deadline = time.monotonic() + 30
        while len(seen) < 4 and time.monotonic() < deadline:
            popped = httpx.get(f"{url}/api/v1/pop/queue/h", params={"batch": 10, "autoAck": "true"}, timeout=30)
            if popped.status_code == 200:
                seen += [m["data"] for m in popped.json()["messages"]]
            else:
                time.sleep(0.2)
        assert seen == [1, 2, 3, 4]
        ids = [m for m in during.json()]
        assert ids[0]["message_id"] != ids[1]["message_id"]
    finally:
        stop_process(process)
        server.stop(mode="immediate")


async def _long_poll(host: str, port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_thousands_of_concurrent_long_polls_are_all_served_together(broker_url):
    """A long poll holds a request slot of its worker for its whole wait; with the HTTP
    server's default limits (1,024 concurrent requests across the workers, a 1,024-connection
    listen backlog) the polls past that waited for earlier ones to end, or stalled in the
    kernel for half a minute."""
    host, port = broker_url.removeprefix("http://").split(":")
    path = "/api/v1/pop/queue/idle-crowd?wait=true&timeout=4000&batch=1"
    polls = 3_000
    started = time.monotonic()
    statuses = await asyncio.wait_for(
        asyncio.gather(*(_long_poll(host, int(port), path) for _ in range(polls))), timeout=60)
    elapsed = time.monotonic() - started
    assert statuses == [204] * polls
    assert elapsed < 10, f"{polls} long polls of 4 s took {elapsed:.1f} s: they were served in turns"


def test_a_database_served_before_deployments_existed_forms_one_and_keeps_its_messages(database_url):
    url = create_database(database_url, "upgraded")
    process, broker = start_broker(url, workers=1)
    try:
        items = [{"queue": "kept", "partition": "old", "payload": {"n": n}} for n in range(3)]
        assert httpx.post(f"{broker}/api/v1/push", json={"items": items}, timeout=10).status_code == 201
    finally:
        stop_process(process)
    old = asyncio.run(unform(url))  # now as a database from before membership looks
    process, broker = start_broker(url, workers=1)
    try:
        popped = httpx.get(f"{broker}/api/v1/pop/queue/kept/partition/old", params={"batch": 10}, timeout=10).json()
        assert [m["data"]["n"] for m in popped["messages"]] == [0, 1, 2]
        item = {"queue": "kept", "partition": "new", "payload": {}}
        assert httpx.post(f"{broker}/api/v1/push", json={"items": [item]}, timeout=10).status_code == 201
    finally:
        stop_process(process)
    own, members, numbers_from, new = asyncio.run(formed(url))
    assert members == [own]
    assert home_of(old, numbers_from) == 0 and home_of(new, numbers_from) == 0
    assert number_of(old) < numbers_from <= number_of(new)


async def unform(url: str):
    """Takes the database back to before membership; answers partition 'old''s id."""
    async with connection(url) as conn:
        await conn.execute("DELETE FROM rq_members")
        await conn.execute("UPDATE rq_member_self SET numbers_from = NULL")
        await conn.execute("ALTER SEQUENCE rq_partition_numbers INCREMENT BY 1")
        return await conn.fetchval("SELECT id FROM rq_partitions WHERE name = 'old'")


async def formed(url: str) -> tuple:
    async with connection(url) as conn:
        own, numbers_from = await conn.fetchrow("SELECT id, numbers_from FROM rq_member_self")
        members = [row[0] for row in await conn.fetch("SELECT id FROM rq_members")]
        return own, members, numbers_from, await conn.fetchval("SELECT id FROM rq_partitions WHERE name = 'new'")
