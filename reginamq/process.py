"""One worker process of the server: its broker, its maintenance loops and its HTTP app.

The server (server.py) starts N of these with granian; each builds its own pool, waiters and
loops from the settings the parent passed through the environment, and any of them can answer
any request because all of their state that matters is in the database.
"""

from __future__ import annotations

import logging

from reginamq.config import Settings
from reginamq.engine.broker import Broker
from reginamq.http.app import App
from reginamq.maintenance.loops import Maintenance


def create_app() -> App:
    """Entry point for the HTTP server's worker processes: settings come from the environment."""
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    broker = Broker(settings)
    return App(broker, services=[Maintenance(broker)])
