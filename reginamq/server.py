"""Running the app under granian (RSGI, its native interface), worker processes sharing one port.

Granian stops a worker by waiting for its open requests, and a long poll may stay open for
its whole timeout. So before the workers are asked to stop, each one gets SIGUSR1, on which
it answers every parked long poll at once (204); then the ordinary graceful stop follows.
"""

from __future__ import annotations

import contextlib
import os
import signal

from granian.constants import Interfaces, Loops
from granian.server import MPServer

from reginamq.config import Settings

DRAIN_SIGNAL = signal.SIGUSR1
# A parked long poll holds one of its worker's request slots for its whole wait (it holds no
# database connection), so thousands of consumers mean thousands of concurrent requests.
# Granian's defaults (a 1,024-connection listen backlog and 1,024 / workers concurrent requests
# a worker) served such a crowd in turns, and connections past the backlog stalled in the
# kernel for up to half a minute. The kernel clamps the backlog to net.core.somaxconn.
LISTEN_BACKLOG = 4096
REQUESTS_PER_WORKER = 10_000


class BrokerServer(MPServer):
    def _stop_workers(self):
        for worker in self.wrks:
            with contextlib.suppress(ProcessLookupError, AttributeError, TypeError):
                os.kill(worker.inner.pid, DRAIN_SIGNAL)
        super()._stop_workers()


def serve(settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM (HTTPS when given a certificate and key); worker processes read
    their settings from the environment."""
    os.environ.update(settings.to_env())
    BrokerServer(
        "reginamq.http.app:create_app",
        factory=True,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.RSGI,
        workers=settings.workers,
        loop=Loops.uvloop,
        log_access=False,
        respawn_failed_workers=True,
        backlog=LISTEN_BACKLOG,
        backpressure=REQUESTS_PER_WORKER,
        workers_kill_timeout=30,
        ssl_cert=settings.tls_cert,
        ssl_key=settings.tls_key,
    ).serve()
