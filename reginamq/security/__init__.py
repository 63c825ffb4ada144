"""Access control: who may call which route (roles) and how a bearer token proves it (tokens)."""
