"""Running the app under granian (RSGI, its native interface): the port, claimed for this broker
alone, and worker processes sharing it.

The port. A broker never joins a port that another program or broker serves: the kernel would
split the clients between them, and messages pushed to one would be missing from the other.
Granian's workers each bind the port with SO_REUSEPORT (the kernel then spreads connections
evenly over them), which would as readily join another broker's sockets. So a
:class:`PortClaim`, made before anything else starts,

- takes the port's lock, an abstract Unix socket named after the port, held by the serving
  process for its life (on Linux abstract names live per network namespace, as ports do, and
  the kernel drops them with their process; elsewhere an exclusive lock on a file in the
  temporary folder), so of two brokers started together one goes on;
- binds a probe socket to the address with SO_REUSEADDR (a previous run's connections in
  TIME_WAIT do not block it) and without SO_REUSEPORT, which fails while any socket listens on
  the address or on one overlapping it (the wildcard address and a specific one), and holds it
  until granian is about to bind, so nothing can take the address while the database starts.

What is left is the instant between dropping the probe and granian's binding: a program that
binds the address then without SO_REUSEPORT makes granian fail (one line, as below); one with
SO_REUSEPORT of the same user would be joined.

Granian stops a worker by waiting for its open requests, and a long poll may stay open for
its whole timeout. So before the workers are asked to stop, each one gets SIGUSR1, on which
it answers every parked long poll at once (204); then the ordinary graceful stop follows.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
import ssl
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from granian.constants import Interfaces, Loops
from granian.server import MPServer

from reginamq.common.signals import DRAIN_SIGNAL
from reginamq.config import Settings

# A parked long poll holds one of its worker's request slots for its whole wait (it holds no
# database connection), so thousands of consumers mean thousands of concurrent requests.
# Granian's defaults (a 1,024-connection listen backlog and 1,024 / workers concurrent requests
# a worker) would serve such a crowd in turns, and a connection past the backlog waits in the
# kernel until its client retries. The kernel clamps the backlog to net.core.somaxconn.
LISTEN_BACKLOG = 4096
REQUESTS_PER_WORKER = 10_000


class PortUnavailable(Exception):
    """The broker cannot serve the address it was given; the message says what to do."""


class TlsUnusable(Exception):
    """The certificate or key cannot serve HTTPS; the message says which file and why."""


class PortClaim:
    """The port's lock and its probe socket; made, this broker has the port to itself or raised
    :class:`PortUnavailable`."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        family, address = _resolve(host, port)
        self._lock = _lock(port)
        self._probe: socket.socket | None = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._probe.bind(address)
        except OSError as error:
            self.close()
            raise _refusal(error, host, port) from None

    def hand_over(self) -> None:
        """Granian binds the address now: the probe goes, the lock stays."""
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def close(self) -> None:
        self.hand_over()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _resolve(host: str, port: int) -> tuple[int, tuple]:
    try:
        family, _type, _proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise PortUnavailable(f"--host {host} is not an address of this machine ({error}); "
                              "give one of its addresses, or 0.0.0.0 for all") from None
    return family, address


def _lock(port: int):
    """The port's lock, held open for the serving process's life (anything with ``close``)."""
    if sys.platform == "linux":
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0reginamq-port-{port}")
        except OSError as error:
            lock.close()
            _locked_out(error, port)
        return lock
    # elsewhere no abstract socket names: an exclusive lock on a file, dropped with the process
    lock = open(Path(tempfile.gettempdir()) / f"reginamq-port-{port}.lock", "a")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        lock.close()
        _locked_out(error, port)
    return lock


def _locked_out(error: OSError, port: int):
    if error.errno in (errno.EADDRINUSE, errno.EAGAIN, errno.EWOULDBLOCK):
        raise PortUnavailable(f"port {port} is already in use by another reginamq broker; "
                              "stop it or choose another port with --port") from None
    raise PortUnavailable(f"cannot take the lock of port {port}: {error.strerror or error}") from None


def _refusal(error: OSError, host: str, port: int) -> PortUnavailable:
    if error.errno == errno.EADDRINUSE:
        return PortUnavailable(f"port {port} is already in use by another program; "
                               "stop it or choose another port with --port")
    if error.errno == errno.EACCES:
        return PortUnavailable(f"not allowed to listen on port {port} (ports below 1024 need administrator "
                               "rights); choose a port from 1024 up with --port")
    if error.errno == errno.EADDRNOTAVAIL:
        return PortUnavailable(f"{host} is not an address of this machine; give one of its addresses "
                               "with --host, or 0.0.0.0 for all")
    return PortUnavailable(f"cannot listen on {host} port {port}: {error.strerror or error}")


def check_tls(cert: Path, key: Path) -> None:
    """Fail now, with the file named, rather than in every worker: missing or unreadable files,
    something that is not PEM, a key that does not match the certificate, an encrypted key."""
    for path, what in ((cert, "certificate"), (key, "key")):
        try:
            with open(path, "rb"):
                pass
        except OSError as error:
            raise TlsUnusable(f"cannot read the TLS {what} {path}: {error.strerror or error}") from None

    def no_password() -> str:
        raise TlsUnusable(f"the TLS key {key} is encrypted; give an unencrypted key (PEM) with --tls-key")

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=no_password)
    except ssl.SSLError as error:
        raise TlsUnusable(f"the TLS certificate {cert} and key {key} cannot serve HTTPS ({error.reason or error}); "
                          "give a PEM certificate and its own private key") from None


class BrokerServer(MPServer):
    def _stop_workers(self):
        for worker in self.wrks:
            with contextlib.suppress(ProcessLookupError, AttributeError, TypeError):
                os.kill(worker.inner.pid, DRAIN_SIGNAL)
        super()._stop_workers()


def serve(settings: Settings, claim: PortClaim, on_listening: Callable[[], None] = lambda: None) -> None:
    """Serve on the claimed port until SIGINT/SIGTERM (HTTPS when given a certificate and key);
    ``on_listening`` runs once the port listens. Worker processes read their settings from the
    environment. Raises :class:`PortUnavailable` if the port was taken since it was claimed."""
    os.environ.update(settings.to_env())
    server = BrokerServer(
        "reginamq.process:create_app",
        factory=True,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.RSGI,
        workers=settings.workers,
        loop=Loops.uvloop,
        log_access=False,
        log_level=settings.log_level,
        respawn_failed_workers=True,
        backlog=LISTEN_BACKLOG,
        backpressure=REQUESTS_PER_WORKER,
        workers_kill_timeout=30,
        ssl_cert=settings.tls_cert,
        ssl_key=settings.tls_key,
    )
    server.on_startup(on_listening)
    claim.hand_over()
    try:
        server.serve()
    except (OSError, RuntimeError) as error:
        failed = _os_error(error)
        if failed is None:
            raise
        raise _refusal(failed, settings.host, settings.port) from None


def _os_error(error: Exception) -> OSError | None:
    """The system call's failure behind a start-up error (granian reports a failed bind as a
    RuntimeError whose text ends in "(os error N)", followed by a backtrace)."""
    if isinstance(error, OSError):
        return error
    found = re.search(r"\(os error (\d+)\)", str(error))
    if found is None:
        return None
    number = int(found[1])
    return OSError(number, os.strerror(number))
