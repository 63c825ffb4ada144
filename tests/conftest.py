"""Fixtures shared by every test: one real PostgreSQL (the embedded one) and one real broker.

The broker runs as `reginamq serve` in a child process with two worker processes, exactly as
a user runs it, so every test also exercises cross-process wake-ups. Each test works on its
own queue names, so tests do not see each other's messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import psutil
import pytest

from reginamq.maintenance.leader import LEASE_SECONDS
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema

# Every broker a test starts gets its own spool folder under this one, removed when the session
# ends, so runs do not pile folders up in the system's temporary directory.
SPOOL_ROOT = Path(tempfile.mkdtemp(prefix="reginamq-test-spools-"))


def spool_dir() -> str:
    """A fresh, empty spool folder for one broker (a restart that must find its spool reuses it)."""
    return tempfile.mkdtemp(prefix="spool-", dir=SPOOL_ROOT)


def pytest_sessionstart(session) -> None:
    """Keep the layout tests/README.md describes: every test file in the folder of its layer,
    and one name for one test file across the tree."""
    here = Path(__file__).resolve().parent
    loose = sorted(path.name for path in here.glob("test_*.py"))
    names = Counter(path.name for path in here.rglob("test_*.py"))
    twice = sorted(name for name, count in names.items() if count > 1)
    if loose or twice:
        raise pytest.UsageError(f"tests/README.md: test files directly in tests/: {loose or 'none'}; "
                                f"test file names used twice: {twice or 'none'}")


def pytest_sessionfinish(session, exitstatus) -> None:
    shutil.rmtree(SPOOL_ROOT, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("broker did not become healthy in time")


# REGINAMQ_TEST_SHARDS=N (N > 1): the session's brokers serve the session's database and N - 1
# more of its PostgreSQL as the member databases of one deployment (docs/shards.md), and what a
# test reads or changes directly in the session's database it does on every member (``db``).
SHARDS = int(os.environ.get("REGINAMQ_TEST_SHARDS", "1"))
MEMBERS: dict[str, list[str]] = {}  # the session's database → its deployment's members


def start_broker(database_url: str, workers: int = 2, extra_env: dict | None = None,
                 log_path: Path | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    database_url = " ".join(MEMBERS.get(database_url, [database_url]))
    env = {**os.environ, "REGINAMQ_DATABASE_URL": database_url, "REGINAMQ_MAINTENANCE_INTERVAL": "0.3",
           "REGINAMQ_SPOOL_DIR": spool_dir(), **(extra_env or {})}
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "reginamq", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process)
    remember_database(process, database_url)
    return process, url


# The database of each broker started here: once stopped, its elected loops' leases are handed back.
BROKER_DATABASES: dict[int, str] = {}


def remember_database(process: subprocess.Popen, database_url: str) -> None:
    BROKER_DATABASES[process.pid] = database_url


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    database_url = BROKER_DATABASES.pop(process.pid, None)
    for served in (database_url or "").split():
        hand_back_leases(served)


def _holder_gone(holder: str) -> bool:
    """Whether the process named by a lease holder (``host:pid:tag``) no longer runs here."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and not psutil.pid_exists(int(pid))


def hand_back_leases(database_url: str) -> None:
    """Delete the elected loops' leases (retention, stats, ...) that processes no longer running
    hold: a broker a test stopped does not give them back, and the other brokers on its database
    would otherwise run none of those loops for up to LEASE_SECONDS. Runs in a thread of its
    own, so it can be called from async tests too. A database that cannot be reached (a fault
    test's, stopped) is left alone: its leases run out by themselves."""
    async def hand_back() -> None:
        try:
            conn = await asyncpg.connect(database_url, timeout=10)
        except (OSError, asyncpg.PostgresError, TimeoutError):
            return
        try:
            holders = [row[0] for row in await conn.fetch("SELECT holder FROM rq_leader_leases")]
            gone = [holder for holder in holders if _holder_gone(holder)]
            if gone:
                await conn.execute("DELETE FROM rq_leader_leases WHERE holder = ANY($1::text[])", gone)
        finally:
            await conn.close()

    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(hand_back())
        except BaseException as failure:  # raised again in the caller's thread below
            failures.append(failure)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


def query(database_url: str, sql: str, *args) -> list:
    """The rows ``sql`` answers on a connection of its own to ``database_url`` (also for CREATE
    or DROP DATABASE and the like, which answer none)."""
    async def run() -> list:
        conn = await asyncpg.connect(database_url)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


def create_database(database_url: str, prefix: str) -> str:
    """A database of its own in the session's PostgreSQL, schema applied; returns its URL. For
    tests that run a broker with settings of their own, away from every other broker's loops."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    query(database_url, f'CREATE DATABASE "{name}"')
    url = urlsplit(database_url)._replace(path="/" + name).geturl()
    asyncio.run(apply_schema(url))
    return url


@contextlib.contextmanager
def broker_with_clean_log(database_url: str, log_path: Path, extra_env: dict):
    """A one-worker broker with settings of its own; once stopped, its log must show no
    traceback and no failed background round."""
    process, url = start_broker(database_url, workers=1, log_path=log_path, extra_env=extra_env)
    try:
        yield url
    finally:
        stop_process(process)
        text = log_path.read_text(errors="replace")
        assert "Traceback" not in text and "round failed" not in text, text[-4000:]


@pytest.fixture
async def fresh_database(database_url):
    """A database of its own on the test server, empty (no schema), dropped afterwards: for
    tests that need tables nobody else writes to."""
    admin = await asyncpg.connect(database_url)
    name = f"fresh_{os.getpid()}_{time.monotonic_ns()}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url.replace("/postgres?", f"/{name}?")
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="session")
def database_url():
    """A private PostgreSQL for the whole run (or REGINAMQ_TEST_DATABASE_URL), schema applied."""
    given = os.environ.get("REGINAMQ_TEST_DATABASE_URL")
    if given:
        asyncio.run(apply_schema(given))
        yield given
        return
    folder = Path(tempfile.mkdtemp(prefix="reginamq-test-"))
    server = EmbeddedPostgres(folder / "pgdata")
    url = server.start()
    asyncio.run(apply_schema(url))
    if SHARDS > 1:
        MEMBERS[url] = [url, *(create_database(url, "shard") for _ in range(SHARDS - 1))]
    try:
        yield url
    finally:
        server.stop(mode="immediate")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_url(database_url, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("broker") / "broker.log"
    process, url = start_broker(database_url, log_path=log_path)
    try:
        yield url
    finally:
        stop_process(process)
        text = log_path.read_text(errors="replace")
        assert "Traceback" not in text, f"the broker logged an unhandled error:\n{text[-4000:]}"


@pytest.fixture(scope="session")
def auth_broker(database_url, tmp_path_factory):
    """A second broker with access control on (HS256, issuer and audience checked): (url, log path).

    One worker: the secret must reach worker processes through the environment either way."""
    from tests.auth_helpers import AUDIENCE, ISSUER, SECRET

    log_path = tmp_path_factory.mktemp("auth-broker") / "broker.log"
    env = {"REGINAMQ_AUTH": "jwt", "REGINAMQ_AUTH_SECRET": SECRET, "REGINAMQ_AUTH_ISSUER": ISSUER,
           "REGINAMQ_AUTH_AUDIENCE": AUDIENCE, "REGINAMQ_LOG_LEVEL": "debug"}
    process, url = start_broker(database_url, workers=1, extra_env=env, log_path=log_path)
    try:
        yield url, log_path
    finally:
        stop_process(process)
        text = log_path.read_text(errors="replace")
        assert "Traceback" not in text, f"the broker logged an unhandled error:\n{text[-4000:]}"
        assert SECRET not in text, "the JWT secret appeared in the broker's log"


# The key of the session's second broker, which can serve encrypted queues (docs/security.md).
ENCRYPTION_KEY = os.urandom(32).hex()


@pytest.fixture(scope="session")
def keyed_broker(database_url, tmp_path_factory):
    """A one-worker broker holding an encryption key, on the session's database."""
    log_path = tmp_path_factory.mktemp("keyed") / "broker.log"
    process, url = start_broker(database_url, workers=1, log_path=log_path,
                                extra_env={"REGINAMQ_ENCRYPTION_KEY": ENCRYPTION_KEY, "REGINAMQ_LOG_LEVEL": "debug"})
    try:
        yield url
    finally:
        stop_process(process)
        text = log_path.read_text(errors="replace")
        assert "Traceback" not in text, text[-4000:]
        assert ENCRYPTION_KEY not in text, "the encryption key appeared in the broker's log"


@pytest.fixture
async def http(broker_url):
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as client:
        yield client


@pytest.fixture
def queue() -> str:
    """A queue name no other test uses."""
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue2() -> str:
    """A second queue name no other test uses."""
    return f"q2-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def group() -> str:
    """A consumer group name no other test uses."""
    return f"g-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def connection(url: str):
    """A direct database connection, closed at the end."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def opened_store(url: str):
    """A store over the database at `url` with a pool of its own, as a broker process has."""
    database = Database(url, 2)
    await database.open()
    try:
        yield Store(database)
    finally:
        await database.close()


class EveryMember:
    """Connections to every member database (REGINAMQ_TEST_SHARDS), used as one: a statement runs
    on each; rows are put together, counts added up, a condition holds when it holds on every
    member, any other single value is the first found."""

    def __init__(self, connections: list[asyncpg.Connection]):
        self._connections = connections

    async def execute(self, sql: str, *args) -> str:
        """The command's status with the rows of every member counted: ``UPDATE 3``."""
        statuses = [await conn.execute(sql, *args) for conn in self._connections]
        verb, _, count = statuses[0].rpartition(" ")
        if not count.isdigit():
            return statuses[0]
        return f"{verb} {sum(int(status.rpartition(' ')[2]) for status in statuses)}"

    async def fetch(self, sql: str, *args) -> list:
        return [row for conn in self._connections for row in await conn.fetch(sql, *args)]

    async def fetchrow(self, sql: str, *args):
        return next((row for row in await self.fetch(sql, *args)), None)

    async def fetchval(self, sql: str, *args):
        values = [value for conn in self._connections if (value := await conn.fetchval(sql, *args)) is not None]
        if values and all(isinstance(value, bool) for value in values):
            return all(values)  # a condition on what is stored holds when it holds on every member
        if values and all(isinstance(value, int) for value in values):
            return sum(values)
        return values[0] if values else None


@pytest.fixture
async def db(database_url):
    """A direct database connection, for assertions about what is stored (over several member
    databases, :class:`EveryMember`)."""
    urls = MEMBERS.get(database_url, [database_url])
    async with contextlib.AsyncExitStack() as stack:
        connections = [await stack.enter_async_context(connection(url)) for url in urls]
        yield connections[0] if len(connections) == 1 else EveryMember(connections)


@pytest.fixture
async def own_http(own_broker):
    """An HTTP client of the module's own broker (a module that needs a broker of its own
    defines ``own_broker``)."""
    async with httpx.AsyncClient(base_url=own_broker, timeout=30) as client:
        yield client


@pytest.fixture
async def own_db(own_database):
    """A connection to the module's own database (the module defines ``own_database``)."""
    async with connection(own_database) as conn:
        yield conn


async def backdate_segments(conn, queue: str, seconds: float) -> None:
    """Make every message stored in the queue ``seconds`` older (its segments' ``created_at``,
    what a pop compares with the queue's ttl): an hour-old backlog without waiting an hour."""
    moved = await conn.execute(
        """UPDATE rq_segments s SET created_at = s.created_at - make_interval(secs => $2)
             FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id
            WHERE s.partition_id = p.id AND q.name = $1""", queue, seconds)
    assert moved != "UPDATE 0", f"queue {queue} stores no message"


async def stored_for(db, queue: str, seconds: float) -> None:
    """Poll until every message stored in the queue has been stored for more than ``seconds``
    (its segment's ``created_at``, what a pop compares with the queue's ttl)."""
    async def old_enough():
        return await db.fetchval(
            """SELECT bool_and(s.created_at < now() - make_interval(secs => $2)) FROM rq_segments s
                 JOIN rq_partitions p ON p.id = s.partition_id JOIN rq_queues q ON q.id = p.queue_id
                WHERE q.name = $1""", queue, float(seconds))
    assert await eventually(old_enough, seconds + 10), f"queue {queue}: a message is still younger than {seconds} s"


async def eventually(check, seconds: float = 5.0, interval: float = 0.05):
    """Poll an async check until it returns a truthy value (for background effects only)."""
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval)


async def a_round_ran(db, loop: str, since=None, seconds: float = 40.0) -> None:
    """Poll the lease of an elected loop (``retention``, ``stats``) until a round that started
    after ``since`` (a database instant; now if not given) is over: for asserting that the loop
    left something alone, which no state shows sooner. A round starts by renewing its lease, so
    the lease tells when the last round started, and the next renewal that the round ended."""
    if since is None:
        since = await db.fetchval("SELECT now()")

    async def started_after(instant):
        taken = await db.fetchval("SELECT expires_at - make_interval(secs => $2) FROM rq_leader_leases "
                                  "WHERE name = $1", loop, float(LEASE_SECONDS))
        return taken if taken is not None and taken > instant else None

    began = await eventually(lambda: started_after(since), seconds)
    assert began, f"no {loop} round started within {seconds} s"
    assert await eventually(lambda: started_after(began), seconds), f"a {loop} round lasted over {seconds} s"


def wait_until(check, seconds: float = 10.0, interval: float = 0.05):
    """Poll a check until it returns a truthy value or ``seconds`` pass; returns the last value
    (``eventually`` for code that is not async)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


async def lease_runs_out(db, lease_id: str, seconds: float = 10.0) -> None:
    """Poll the database until the lease ``lease_id`` is no longer live (run out, or released):
    from then on an ack with it is refused and a pop may hand its messages out again."""
    async def gone():
        return await db.fetchval(
            """SELECT NOT EXISTS (SELECT 1 FROM rq_consumers WHERE lease_id = $1::uuid
                                     AND span_end IS NOT NULL AND lease_expires_at > now())""", str(lease_id))
    assert await eventually(gone, seconds), f"lease {lease_id} still live after {seconds} s"


async def outlast_lease(popped_at: float, lease_seconds: float) -> None:
    """Let time pass until a lease of ``lease_seconds`` granted by a pop that had answered by
    ``popped_at`` (a ``time.monotonic()`` reading) has surely run out.

    For asserting that something did NOT come back once the lease was over (an ack that was
    applied, a renewal that held): no state shows that sooner, so this waits, and no longer."""
    await asyncio.sleep(max(0.0, popped_at + lease_seconds - time.monotonic()) + 0.05)



# Long enough for a pop sent just before to reach the broker, find nothing and park.
PARK_SECONDS = 0.3


async def let_a_long_poll_park() -> None:
    """Give a long poll sent just before the time to park before the test acts on it.

    Nothing outside the broker shows that a pop has parked, so this waits, briefly. A pop that
    had not parked yet finds what the test then pushes at once: the test still passes, it only
    did not exercise the wake-up that time."""
    await asyncio.sleep(PARK_SECONDS)
