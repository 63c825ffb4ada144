"""reginamq: a partitioned message-queue broker on PostgreSQL, wire-compatible with Queen MQ.

All state lives in PostgreSQL. The layers import only downward: :mod:`reginamq.http` (the
routes) -> :mod:`reginamq.engine` -> :mod:`reginamq.store` (the layer that holds the SQL and
sees the connections) -> :mod:`reginamq.common`, with :mod:`reginamq.config` beside common
and :mod:`reginamq.maintenance` beside http. :mod:`reginamq.server` runs the http app under
granian and :mod:`reginamq.cli` is the ``reginamq`` command; :mod:`reginamq.ctl` is a client
of a running broker and :mod:`reginamq.bench` measures one (and the PostgreSQL under it).

:mod:`reginamq.library` runs the broker inside an application (``from reginamq import Broker``);
it is imported on first use, so ``import reginamq`` (the CLI, every worker process) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reginamq.library import Broker as Broker

__version__ = "0.1.0"
__all__ = ["Broker", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from reginamq.library import Broker

        return Broker
    raise AttributeError(f"module 'reginamq' has no attribute {name!r}")
