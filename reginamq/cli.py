"""The ``reginamq`` command."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import click

from reginamq import __version__
from reginamq.config import DEFAULT_PORT, Settings

log = logging.getLogger("reginamq")


@click.group()
@click.version_option(__version__, prog_name="reginamq")
def main() -> None:
    """reginamq: a partitioned message-queue broker on PostgreSQL, wire-compatible with Queen MQ."""


@main.command()
@click.option("--host", default=None, help="Address to listen on [default: 0.0.0.0].")
@click.option("--port", type=int, default=None, help=f"Port to listen on [default: {DEFAULT_PORT}].")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Folder of the embedded PostgreSQL [default: the user's data dir].")
@click.option("--database-url", default=None,
              help="Use this PostgreSQL (>= 15) instead of the embedded one "
                   "(also REGINAMQ_DATABASE_URL or Queen's PG_HOST/PG_PORT/...).")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Worker processes sharing the port [default: 1].")
@click.option("--pool-size", type=click.IntRange(1, 500), default=None,
              help="Database connections per worker [default: 10].")
@click.option("--max-body-bytes", type=click.IntRange(1024), default=None,
              help="Largest accepted request body [default: 8 MiB].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None)
def serve(**flags) -> None:
    """Start the broker (with an embedded PostgreSQL unless a database URL is given)."""
    settings = Settings.from_env(**flags)
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    embedded = None
    database_url = settings.database_url
    if not database_url:
        from reginamq.store.embedded import EmbeddedPostgres

        embedded = EmbeddedPostgres(settings.data_dir)
        database_url = embedded.start()
    try:
        from reginamq.store.database import apply_schema

        asyncio.run(apply_schema(database_url))
        settings = Settings.from_env(**{**flags, "database_url": database_url})
        _serve_http(settings)
    finally:
        if embedded is not None:
            embedded.stop()


def _serve_http(settings: Settings) -> None:
    from granian import Granian
    from granian.constants import Interfaces, Loops

    os.environ.update(settings.to_env())
    click.echo(f"reginamq {__version__} listening on http://{settings.host}:{settings.port} "
               f"({settings.workers} worker{'s' if settings.workers > 1 else ''})", err=True)
    Granian(
        "reginamq.http.app:create_app",
        factory=True,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        workers=settings.workers,
        loop=Loops.uvloop,
        log_access=False,
        respawn_failed_workers=True,
        workers_kill_timeout=30,
    ).serve()
