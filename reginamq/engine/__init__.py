"""The queue engine: push, pop, ack, leases, transactions and long-poll waiters.

The engine speaks Python values and pre-rendered bytes; the HTTP layer turns requests into
calls here and answers into bytes. All durable state lives in PostgreSQL.
"""
