"""The ``reginamq`` command: ``serve`` (the broker), ``bench``, and the operator commands.

``serve`` refuses what cannot work before anything starts, with one line on stderr and no
traceback (:class:`Refusal`): exit code 2 when the settings are wrong (flags, environment,
auth keys, encryption keys, TLS files), 1 when the machine refuses (the port, the data folder,
the database, the spool folder). The order is chosen so that a refusal leaves nothing behind:
settings first, then the port is claimed (before the database starts, so a taken port costs
no PostgreSQL start), then the embedded PostgreSQL and the schema, then the workers. The
embedded PostgreSQL this command started is stopped on the way out, however the broker ends.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click

from reginamq import __version__
from reginamq.bench.cli import bench
from reginamq.common.errors import Unavailable
from reginamq.config import DEFAULT_PORT, NUMBERS, PAYLOAD_COMPRESSIONS, SettingError, Settings, shard_file_urls
from reginamq.ctl.consumer_groups import group
from reginamq.ctl.dlq import dlq
from reginamq.ctl.messages import pop, push, tail
from reginamq.ctl.queues import queue
from reginamq.ctl.shards import shards
from reginamq.ctl.status import status
from reginamq.engine.encryption import Sealer
from reginamq.engine.spool import SpoolUnusable
from reginamq.engine.spool import prepare_folder as prepare_spool
from reginamq.security.tokens import AuthConfigError, verifier_from
from reginamq.server import PortClaim, PortUnavailable, TlsUnusable, check_tls
from reginamq.server import serve as serve_http
from reginamq.store.embedded import EmbeddedPostgres, EmbeddedPostgresError, shard_data_dir, shard_settings
from reginamq.store.members import check_deployment
from reginamq.store.schema import DatabaseUnusable, apply_schema

log = logging.getLogger("reginamq")
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
@click.version_option(__version__, prog_name="reginamq")
def main() -> None:
    """reginamq: a partitioned message-queue broker on PostgreSQL, wire-compatible with Queen MQ."""


USAGE = 2  # the command line or the environment asks for something that cannot work


class Refusal(click.ClickException):
    """A start-up failure the user can fix: one line on stderr, no traceback; exit code 2 when
    the settings are wrong, 1 when the machine refuses (the port, the data folder, the database)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(f"reginamq: {self.message}", err=True)


def _bounds(name: str) -> click.ParamType:
    """A numeric flag's type, with the bounds its environment variable has too (config.NUMBERS)."""
    kind, low, high = NUMBERS[name]
    return click.IntRange(low, high) if kind is int else click.FloatRange(low, high)


@main.command()
@click.option("--host", default=None, help="Address to listen on [default: 0.0.0.0].")
@click.option("--port", type=_bounds("port"), default=None,
              help=f"Port to listen on [default: {DEFAULT_PORT}].")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Folder of the embedded PostgreSQL [default: the user's data dir].")
@click.option("--database-url", "database_urls", multiple=True, metavar="URL",
              help="Use this PostgreSQL (>= 15) instead of the embedded one (also REGINAMQ_DATABASE_URL or "
                   "Queen's PG_HOST/PG_PORT/...). Given more than once, partitions are spread over those "
                   "databases (docs/shards.md); REGINAMQ_DATABASE_URL then holds them space-separated.")
@click.option("--shard-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="REGINAMQ_SHARD_FILE",
              help="A file listing the member databases, one URL a line ('#' starts a comment), in place of "
                   "--database-url given once per database (also REGINAMQ_SHARD_FILE).")
@click.option("--shards", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Run this many embedded PostgreSQL servers and spread partitions over them "
                   "(for trying several databases on one machine; docs/shards.md). Started again "
                   "with a larger N, the new servers join the deployment.")
@click.option("--workers", type=_bounds("workers"), default=None,
              help="Worker processes sharing the port [default: one per two cores; with PostgreSQL on "
                   "a machine of its own, one per core is the better choice].")
@click.option("--pool-size", type=_bounds("pool_size"), default=None,
              help="Database connections per worker [default: 10].")
@click.option("--max-body-bytes", type=_bounds("max_body_bytes"), default=None,
              help="Largest accepted request body [default: 8 MiB].")
@click.option("--default-subscription-mode", type=click.Choice(["all", "new"]), default=None,
              help="Where a named consumer group starts reading at its first pop when the pop does not say: "
                   "new = messages pushed from then on, as Queen; all = the whole backlog "
                   "(also REGINAMQ_DEFAULT_SUBSCRIPTION_MODE or Queen's DEFAULT_SUBSCRIPTION_MODE) [default: new].")
@click.option("--maintenance-interval", type=_bounds("maintenance_interval"), default=None,
              help="Seconds between retention rounds [default: 5].")
@click.option("--retention-parallelism", type=_bounds("retention_parallelism"), default=None,
              help="Retention workers of the elected process, each over its own partitions [default: 1].")
@click.option("--partition-idle-days", type=_bounds("partition_idle_days"), default=None,
              help="Delete partitions empty and unwritten for this many days (fractions allowed; "
                   "0 = never) [default: 7].")
@click.option("--push-flush-spacing-ms", type=_bounds("push_flush_spacing_ms"), default=None,
              help="Least time between the starts of two push writes of a process while independent pushes "
                   "come together: fewer, fuller writes, pops and acks; producers that wait for each answer "
                   "are not held to it (docs/operations.md) [default: 10; 0 = off].")
@click.option("--payload-compression", type=click.Choice(PAYLOAD_COMPRESSIONS), default=None,
              help="How new messages' payloads are stored: lz4 or pglz compress them (lz4 where PostgreSQL "
                   "has it), none stores them as they are (less PostgreSQL CPU a push, more disk); auto is lz4 "
                   "where available, else pglz (docs/operations.md) [default: auto].")
@click.option("--spool-dir", type=click.Path(path_type=Path), default=None,
              help="Where pushes wait (fsynced) while the database is unreachable "
                   "[default: the user data dir, one folder per database].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None)
@click.option("--auth", type=click.Choice(["none", "jwt"]), default=None,
              help="Access control: jwt requires a bearer token with a role on every non-public route "
                   "(docs/security.md) [default: none].")
@click.option("--auth-secret-file", type=_FILE, default=None,
              help="File holding the HS256/384/512 secret (or set REGINAMQ_AUTH_SECRET; never on the command line).")
@click.option("--auth-public-key", type=_FILE, default=None,
              help="PEM public key (RSA, EC or Ed25519/Ed448) verifying RS*/PS*/ES*/EdDSA tokens.")
@click.option("--auth-jwks", type=_FILE, default=None,
              help="Local JWKS file of verification keys, chosen by the token's kid (rotation: list old and new).")
@click.option("--auth-issuer", default=None, help="Required 'iss' claim.")
@click.option("--auth-audience", default=None, help="Required 'aud' claim.")
@click.option("--auth-leeway", type=_bounds("auth_leeway"), default=None,
              help="Clock skew tolerated on exp/nbf/iat, in seconds [default: 30].")
@click.option("--tls-cert", type=_FILE, default=None, help="Serve HTTPS with this PEM certificate (chain).")
@click.option("--tls-key", type=_FILE, default=None, help="The certificate's PEM private key.")
@click.option("--pg-setting", "pg_settings", multiple=True, metavar="NAME=VALUE", envvar="REGINAMQ_PG_SETTINGS",
              help="A setting of the embedded PostgreSQL, over reginamq's tuning (repeatable; e.g. "
                   "--pg-setting shared_buffers=4GB; REGINAMQ_PG_SETTINGS holds them space-separated).")
def serve(pg_settings: tuple[str, ...], database_urls: tuple[str, ...], shard_file: Path | None, shards: int,
          **flags) -> None:
    """Start the broker (with an embedded PostgreSQL unless a database URL is given)."""
    if shard_file is not None:
        if database_urls:
            raise Refusal("give the member databases with --database-url or in --shard-file, not both", USAGE)
        try:
            database_urls = tuple(shard_file_urls(shard_file))
        except SettingError as error:
            raise Refusal(str(error), USAGE) from None
    flags["database_url"] = " ".join(database_urls) or None
    try:
        settings = Settings.from_env(**flags)
    except SettingError as error:
        raise Refusal(str(error), USAGE) from None
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise Refusal("--tls-cert and --tls-key go together", USAGE)
    if pg_settings and settings.database_url:
        raise Refusal("--pg-setting tunes the embedded PostgreSQL; set your own server's settings there", USAGE)
    if shards > 1 and settings.database_url:
        raise Refusal("--shards runs embedded PostgreSQL servers; with your own, give --database-url once per "
                      "database", USAGE)
    embedded_settings = dict(_setting(text) for text in pg_settings)
    try:
        verifier_from(settings)  # fail here, before any worker starts, if auth cannot work
        Sealer.from_settings(settings)  # and if an encryption key is malformed
        if settings.tls_cert is not None:
            check_tls(settings.tls_cert, settings.tls_key)
    except (AuthConfigError, TlsUnusable, ValueError) as error:
        raise Refusal(str(error), USAGE) from None
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        claim = PortClaim(settings.host, settings.port)  # before the database starts: a taken port stops here
    except PortUnavailable as error:
        raise Refusal(str(error)) from None
    embedded: list[EmbeddedPostgres] = []
    try:
        database_urls = settings.database_urls
        if not database_urls:
            for shard in range(shards):
                embedded.append(EmbeddedPostgres(shard_data_dir(settings.data_dir, shard),
                                                 shard_settings(embedded_settings, shards)))
                database_urls.append(embedded[-1].claim())
        for url in database_urls:
            asyncio.run(apply_schema(url, settings.payload_compression))
        database_urls = asyncio.run(check_deployment(database_urls, admit_waiting=bool(embedded)))
        settings = Settings.from_env(**{**flags, "database_url": " ".join(database_urls)})
        prepare_spool(settings.resolved_spool_dir())
        scheme = "http" if settings.tls_cert is None else "https"
        serve_http(settings, claim, on_listening=lambda: click.echo(
            f"reginamq {__version__} listening on {scheme}://{settings.host}:{settings.port} "
            f"({settings.workers} worker{'s' if settings.workers > 1 else ''}, auth {settings.auth})", err=True))
    except (PortUnavailable, EmbeddedPostgresError, DatabaseUnusable, SpoolUnusable, Unavailable) as error:
        raise Refusal(str(error)) from None
    finally:
        claim.close()
        for server in reversed(embedded):
            server.release()  # the last user stops it: a library may still use it (store/embedded.py)


def _setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals or not name.replace("_", "").replace(".", "").isalnum():
        raise Refusal(f"--pg-setting {text!r} is not NAME=VALUE", USAGE)
    return name, value


main.add_command(bench)
for command in (queue, push, pop, tail, group, dlq, status, shards):
    main.add_command(command)
