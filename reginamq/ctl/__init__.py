"""Operator commands (``reginamq queue|push|pop|tail|group|dlq|status``): a client of a running broker.

Every command talks HTTP to ``--url`` (default http://127.0.0.1:6632, or REGINAMQ_URL), prints
rich tables (``--json`` for machine output) and exits 0 ok, 1 user error, 2 server error,
3 auth, 4 nothing to do (see :mod:`reginamq.ctl.client` and docs/operations.md).

``reginamq shards`` is the one exception: it changes which databases make up a deployment, so
it talks to the databases themselves (:mod:`reginamq.ctl.shards`).
"""
