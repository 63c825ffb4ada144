"""reginamq: a partitioned message-queue broker on PostgreSQL, wire-compatible with Queen MQ."""

__version__ = "0.1.0"
