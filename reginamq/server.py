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
        workers_kill_timeout=30,
        ssl_cert=settings.tls_cert,
        ssl_key=settings.tls_key,
    ).serve()
