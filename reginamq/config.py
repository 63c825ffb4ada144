"""One settings object for the broker.

Precedence is flags > ``REGINAMQ_*`` environment > Queen's environment names (``PG_HOST`` ...,
``JWT_SECRET`` ...) > defaults. Worker processes receive their settings through the environment,
so everything a worker needs must round-trip through :meth:`Settings.to_env` /
:meth:`Settings.from_env`. Secrets (the JWT secret, a database password) never show in
``repr``: settings get logged and printed in tracebacks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urlsplit, urlunsplit

import platformdirs

DEFAULT_PORT = 6632


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("reginamq")) / "pgdata"


def default_workers() -> int:
    """Worker processes when none are asked for: one per two cores this process may run on. A
    message costs the broker and PostgreSQL about the same CPU, so on a machine that runs both,
    half the cores serve HTTP and half are left to PostgreSQL."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(NUMBERS["workers"][2], cores // 2))


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    data_dir: Path = dataclasses.field(default_factory=default_data_dir)
    database_url: str | None = None
    workers: int = dataclasses.field(default_factory=default_workers)
    pool_size: int = 10
    max_body_bytes: int = 8 * 1024 * 1024
    log_level: str = "info"
    # Where a named consumer group's cursors start at its first pop; Queen's default is "new".
    default_subscription_mode: str = "new"
    maintenance_interval: float = 5.0
    retention_parallelism: int = 1
    partition_idle_days: float = 7.0
    push_flush_spacing_ms: float = 10.0
    # How new segments' payloads are stored (rq_payload_compression, 001_queues_and_partitions.sql).
    payload_compression: str = "auto"
    spool_dir: Path | None = None
    # Access control (docs/security.md): "none" or "jwt", and where the verification keys come from.
    auth: str = "none"
    auth_secret: str | None = None
    auth_secret_file: Path | None = None
    auth_public_key: Path | None = None
    auth_jwks: Path | None = None
    auth_issuer: str | None = None
    auth_audience: str | None = None
    auth_leeway: float = 30.0
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Payload encryption at rest (engine/encryption.py): the current key seals, older keys still open.
    # Environment only (a flag would show the key in the process list).
    encryption_key: str | None = None
    encryption_old_keys: str | None = None

    _ENV: ClassVar[dict[str, str]] = {
        "host": "REGINAMQ_HOST",
        "port": "REGINAMQ_PORT",
        "data_dir": "REGINAMQ_DATA_DIR",
        "database_url": "REGINAMQ_DATABASE_URL",
        "workers": "REGINAMQ_WORKERS",
        "pool_size": "REGINAMQ_POOL_SIZE",
        "max_body_bytes": "REGINAMQ_MAX_BODY_BYTES",
        "log_level": "REGINAMQ_LOG_LEVEL",
        "default_subscription_mode": "REGINAMQ_DEFAULT_SUBSCRIPTION_MODE",
        "maintenance_interval": "REGINAMQ_MAINTENANCE_INTERVAL",
        "retention_parallelism": "REGINAMQ_RETENTION_PARALLELISM",
        "partition_idle_days": "REGINAMQ_PARTITION_IDLE_DAYS",
        "push_flush_spacing_ms": "REGINAMQ_PUSH_FLUSH_SPACING_MS",
        "payload_compression": "REGINAMQ_PAYLOAD_COMPRESSION",
        "spool_dir": "REGINAMQ_SPOOL_DIR",
        "auth": "REGINAMQ_AUTH",
        "auth_secret": "REGINAMQ_AUTH_SECRET",
        "auth_secret_file": "REGINAMQ_AUTH_SECRET_FILE",
        "auth_public_key": "REGINAMQ_AUTH_PUBLIC_KEY",
        "auth_jwks": "REGINAMQ_AUTH_JWKS",
        "auth_issuer": "REGINAMQ_AUTH_ISSUER",
        "auth_audience": "REGINAMQ_AUTH_AUDIENCE",
        "auth_leeway": "REGINAMQ_AUTH_LEEWAY",
        "tls_cert": "REGINAMQ_TLS_CERT",
        "tls_key": "REGINAMQ_TLS_KEY",
        "encryption_key": "REGINAMQ_ENCRYPTION_KEY",
        "encryption_old_keys": "REGINAMQ_ENCRYPTION_OLD_KEYS",
    }
    # Queen's names for the same settings, so a Queen deployment's environment carries over.
    _QUEEN_ENV: ClassVar[dict[str, str]] = {
        "auth_secret": "JWT_SECRET",
        "auth_issuer": "JWT_ISSUER",
        "auth_audience": "JWT_AUDIENCE",
        "auth_leeway": "JWT_CLOCK_SKEW",
        "encryption_key": "QUEEN_ENCRYPTION_KEY",
    }
    _SECRETS: ClassVar[frozenset[str]] = frozenset({"auth_secret", "encryption_key", "encryption_old_keys"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> Settings:
        """Build settings from the environment, then apply explicit (flag) overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(cls._ENV[field.name])
            if raw not in (None, ""):
                values[field.name] = _coerce(field.name, raw, cls._ENV[field.name])
        for name, queen_name in cls._QUEEN_ENV.items():
            if name not in values and env.get(queen_name):
                values[name] = _coerce(name, env[queen_name], queen_name)
        if "auth" not in values and env.get("JWT_ENABLED", "").lower() == "true":
            values["auth"] = "jwt"
        if "default_subscription_mode" not in values and env.get("DEFAULT_SUBSCRIPTION_MODE"):
            values["default_subscription_mode"] = subscription_mode(env["DEFAULT_SUBSCRIPTION_MODE"],
                                                                    "DEFAULT_SUBSCRIPTION_MODE")
        if "database_url" not in values:
            queen_url = _queen_pg_url(env)
            if queen_url:
                values["database_url"] = queen_url
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def checked(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """:meth:`from_env`, with ``overrides`` held to the bounds and spellings the environment
        and the flags are held to (a SettingError names the setting): for callers that give
        settings as Python values, where no flag parser has checked them."""
        fields = {field.name for field in dataclasses.fields(cls)}
        checked = {}
        for name, value in overrides.items():
            if name not in fields:
                raise SettingError(f"unknown setting {name!r}")
            if value is not None:
                checked[name] = _check_value(name, value)
        return cls.from_env(environ, **checked)

    def __repr__(self) -> str:
        shown = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and field.name in self._SECRETS:
                value = "<hidden>"
            elif field.name == "database_url" and value:
                value = " ".join(_without_password(url) for url in value.split())
            shown.append(f"{field.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    @property
    def database_urls(self) -> list[str]:
        """The member databases, in ordinal order: ``database_url`` holds them space-separated
        (a deployment of several databases, docs/shards.md), most often one."""
        return (self.database_url or "").split()

    def resolved_spool_dir(self) -> Path:
        """Where pushes wait while the database is away: one folder per database, so two
        brokers on different databases never replay into each other's. Over several member
        databases, the folder is the catalog's (the first URL): a broker given one member more
        after `reginamq shards add` finds the pushes it spooled before."""
        if self.spool_dir is not None:
            return self.spool_dir
        catalog = self.database_urls[0] if self.database_urls else ""
        digest = hashlib.sha256(catalog.encode()).hexdigest()[:12]
        return Path(platformdirs.user_data_dir("reginamq")) / "spool" / digest

    def to_env(self) -> dict[str, str]:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[self._ENV[field.name]] = str(value)
        return out


class SettingError(ValueError):
    """A setting from the environment that cannot be used; the message names the variable."""


def shard_file_urls(path: Path) -> list[str]:
    """The member databases a shard file lists, in ordinal order: one URL a line; blank lines
    and lines starting with ``#`` are skipped (docs/operations.md, "Several databases")."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise SettingError(f"cannot read the shard file {path}: {error}") from None
    urls = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    for url in urls:
        if " " in url or "\t" in url:
            raise SettingError(f"the shard file {path} holds one database URL a line, not {url!r}")
    if not urls:
        raise SettingError(f"the shard file {path} lists no database URL")
    return urls


# The numeric settings: their type and bounds, for the environment and the flags alike.
NUMBERS: dict[str, tuple[type, float, float | None]] = {  # None: no upper bound
    "port": (int, 1, 65_535),
    "workers": (int, 1, 64),
    "pool_size": (int, 1, 500),
    "max_body_bytes": (int, 1024, None),
    "retention_parallelism": (int, 1, 16),
    "maintenance_interval": (float, 0.1, 3600),
    "partition_idle_days": (float, 0, 36_500),
    "push_flush_spacing_ms": (float, 0, 1_000),
    "auth_leeway": (float, 0, 3600),
}
_LOG_LEVELS = ("debug", "info", "warning", "error")
PAYLOAD_COMPRESSIONS = ("auto", "lz4", "pglz", "none")


def subscription_mode(raw: str, source: str = "REGINAMQ_DEFAULT_SUBSCRIPTION_MODE") -> str:
    """``all`` or ``new``; Queen's spellings of ``new`` (``new-only``, ``new_only``, ``newonly``;
    trimmed, any case) are ``new``. Anything else is refused: a typo must not decide silently
    whether a new group replays the backlog."""
    mode = raw.strip().lower()
    if mode == "all":
        return "all"
    if mode in ("new", "new-only", "new_only", "newonly"):
        return "new"
    raise SettingError(f"{source} must be all or new, not {raw!r}")


_PATHS = ("data_dir", "spool_dir", "auth_secret_file", "auth_public_key", "auth_jwks", "tls_cert", "tls_key")


def _coerce(name: str, raw: str, variable: str) -> object:
    if name == "default_subscription_mode":
        return subscription_mode(raw, variable)
    if name in NUMBERS:
        kind = NUMBERS[name][0]
        try:
            value = kind(raw)
        except ValueError:
            raise SettingError(f"{variable} must be {'an integer' if kind is int else 'a number'}, "
                               f"not {raw!r}") from None
        return _within_bounds(name, value, variable, raw)
    if name == "payload_compression":
        if raw.strip().lower() not in PAYLOAD_COMPRESSIONS:
            raise SettingError(f"{variable} must be one of {', '.join(PAYLOAD_COMPRESSIONS)}, not {raw!r}")
        return raw.strip().lower()
    if name == "log_level":
        if raw.lower() not in _LOG_LEVELS:
            raise SettingError(f"{variable} must be one of {', '.join(_LOG_LEVELS)}, not {raw!r}")
        return raw.lower()
    if name in _PATHS:
        return Path(raw)
    return raw


def _within_bounds(name: str, value: float, variable: str, given: object) -> float:
    _kind, low, high = NUMBERS[name]
    if value < low or (high is not None and value > high):
        raise SettingError(f"{variable} must be at least {low}, not {given}" if high is None else
                           f"{variable} must be between {low} and {high}, not {given}")
    return value


def _check_value(name: str, value: object) -> object:
    """A setting given as a Python value, held to what :func:`_coerce` holds its text to."""
    if name in NUMBERS:
        kind = NUMBERS[name][0]
        allowed = (int,) if kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise SettingError(f"{name} must be {'an integer' if kind is int else 'a number'}, not {value!r}")
        return _within_bounds(name, kind(value), name, value)
    if name in _PATHS:
        if not isinstance(value, str | os.PathLike):
            raise SettingError(f"{name} must be a path, not {value!r}")
        return Path(value)
    if not isinstance(value, str):
        raise SettingError(f"{name} must be a string, not {value!r}")
    return _coerce(name, value, name)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":<hidden>@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _queen_pg_url(env) -> str | None:
    """Queen's images are configured with PG_HOST/PG_PORT/...; honour them when no URL is given."""
    host = env.get("PG_HOST")
    if not host:
        return None
    user = quote(env.get("PG_USER", "postgres"), safe="")
    password = env.get("PG_PASSWORD", "")
    auth = f"{user}:{quote(password, safe='')}" if password else user
    port = env.get("PG_PORT", "5432")
    database = quote(env.get("PG_DATABASE", "postgres"), safe="")
    return f"postgresql://{auth}@{host}:{port}/{database}"
