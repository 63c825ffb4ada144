"""reginamq: a partitioned message-queue broker on PostgreSQL, wire-compatible with Queen MQ.

All state lives in PostgreSQL. The layers import only downward: :mod:`reginamq.http` (the
routes) -> :mod:`reginamq.engine` -> :mod:`reginamq.store` (the layer that holds the SQL and
sees the connections) -> :mod:`reginamq.common`, with :mod:`reginamq.config` beside common
and :mod:`reginamq.maintenance` beside http. :mod:`reginamq.server` runs the http app under
granian and :mod:`reginamq.cli` is the ``reginamq`` command; :mod:`reginamq.ctl` is a client
of a running broker and :mod:`reginamq.bench` measures one (and the PostgreSQL under it).
"""
__version__ = "0.1.0"
