"""Access control: who may call which route (roles) and how a bearer token proves it (tokens).

Off by default; with ``--auth jwt`` every route that is not public needs a bearer token whose
roles grant the route's requirement (reginamq/http/guard.py enforces it per request).
"""
