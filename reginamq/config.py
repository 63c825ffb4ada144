"""One settings object for the broker.

Precedence is flags > ``REGINAMQ_*`` environment > Queen's environment names (``PG_HOST`` ...)
> defaults. Worker processes receive their settings through the environment, so everything a
worker needs must round-trip through :meth:`Settings.to_env` / :meth:`Settings.from_env`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import platformdirs

DEFAULT_PORT = 6632


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("reginamq")) / "pgdata"


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    data_dir: Path = dataclasses.field(default_factory=default_data_dir)
    database_url: str | None = None
    workers: int = 1
    pool_size: int = 10
    max_body_bytes: int = 8 * 1024 * 1024
    log_level: str = "info"
    default_subscription_mode: str = "all"
    maintenance_interval: float = 5.0
    spool_dir: Path | None = None

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
        "spool_dir": "REGINAMQ_SPOOL_DIR",
    }

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> Settings:
        """Build settings from the environment, then apply explicit (flag) overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(cls._ENV[field.name])
            if raw not in (None, ""):
                values[field.name] = _coerce(field.name, raw)
        if "default_subscription_mode" not in values and env.get("DEFAULT_SUBSCRIPTION_MODE"):
            values["default_subscription_mode"] = env["DEFAULT_SUBSCRIPTION_MODE"]
        if "database_url" not in values:
            queen_url = _queen_pg_url(env)
            if queen_url:
                values["database_url"] = queen_url
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def resolved_spool_dir(self) -> Path:
        """Where pushes wait while the database is away: one folder per database, so two
        brokers on different databases never replay into each other's."""
        if self.spool_dir is not None:
            return self.spool_dir
        digest = hashlib.sha256((self.database_url or "").encode()).hexdigest()[:12]
        return Path(platformdirs.user_data_dir("reginamq")) / "spool" / digest

    def to_env(self) -> dict[str, str]:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[self._ENV[field.name]] = str(value)
        return out


def _coerce(name: str, raw: str) -> object:
    if name in ("port", "workers", "pool_size", "max_body_bytes"):
        return int(raw)
    if name == "maintenance_interval":
        return float(raw)
    if name in ("data_dir", "spool_dir"):
        return Path(raw)
    return raw


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
