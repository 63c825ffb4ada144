"""An own broker for a bench run: ``reginamq serve`` on a free loopback port and an embedded
PostgreSQL in a temporary (or given) folder, started before the load and stopped after it.

It runs as a separate ``python -m reginamq serve`` process, exactly as a user runs it, so the
broker's CPU and memory are its own process tree's and nothing of the generator leaks in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from reginamq.store.embedded import EmbeddedPostgres


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_url(data_dir: Path) -> str:
    """The database URL the broker's embedded PostgreSQL answers on (a Unix socket)."""
    return EmbeddedPostgres(data_dir).url


class OwnBroker:
    """``reginamq serve --workers N`` with an embedded PostgreSQL, for the length of a run."""

    def __init__(self, workers: int = 1, data_dir: Path | None = None, log_path: Path | None = None,
                 serve_args: tuple[str, ...] = ()):
        """``serve_args`` go to ``reginamq serve`` after the bench's own flags (for instance
        ``--push-flush-spacing-ms 20``): the broker's environment is cleared of ``REGINAMQ_*``,
        so flags are how a run tunes it."""
        self.workers = workers
        self.serve_args = tuple(serve_args)
        self.temporary = data_dir is None
        self.root = Path(tempfile.mkdtemp(prefix="reginamq-bench-")) if data_dir is None else Path(data_dir)
        self.data_dir = (self.root / "pgdata") if data_dir is None else self.root
        self.data_dir = self.data_dir.expanduser().resolve()
        self.log_path = log_path or Path(tempfile.gettempdir()) / f"reginamq-bench-{os.getpid()}.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    @property
    def database_url(self) -> str:
        return embedded_url(self.data_dir)

    def start(self, timeout: float = 120.0) -> None:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("REGINAMQ_", "PG_"))}  # our own database, whatever the shell says
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the broker
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reginamq", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", str(self.workers), "--data-dir", str(self.data_dir), *self.serve_args],
            env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the broker did not become healthy in {timeout:.0f} s; see {self.log_path}")

    def __enter__(self) -> OwnBroker:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (the broker then stops its PostgreSQL), SIGKILL if it does not go in time."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                self._stop_orphaned_postgres()
        if hasattr(self, "_log"):
            self._log.close()
        if self.temporary:
            shutil.rmtree(self.root, ignore_errors=True)
            self._remove_clean_log()

    def _remove_clean_log(self) -> None:
        """Keep the broker's log only when it has something to say (an error or a traceback)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return
        if "Traceback" not in text and " ERROR " not in text:
            self.log_path.unlink(missing_ok=True)

    def _stop_orphaned_postgres(self) -> None:
        """A killed broker leaves its PostgreSQL running: stop it before removing its folder."""
        server = EmbeddedPostgres(self.data_dir)
        server.started_here = True
        with contextlib.suppress(Exception):
            server.stop(mode="immediate")
