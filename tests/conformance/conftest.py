"""Conformance suite: the broker driven only through Queen's official Python client.

Every test here talks to the running broker (`broker_url`, two worker processes on a real
PostgreSQL) exclusively through `queen.Queen` (PyPI `queen-mq` 2.6). The `db` fixture is used
only to look at what was stored where the client has no way to read it (dead letters, until
GET /api/v1/dlq exists).

Things about the client that shape these tests:
- `Queen(...)` installs SIGINT/SIGTERM handlers in its constructor (2.6 has no opt-out) and
  resets them to SIG_DFL on close(); the fixture puts pytest's handlers back afterwards.
- `pop()` never raises: any error becomes []. Tests therefore assert on what came back.
- The client cannot send `leaseSeconds`; a pop's lease is the queue's `lease_time`.
"""

from __future__ import annotations

import pytest

from tests.conformance.helpers import open_client


@pytest.fixture
async def queen(broker_url):
    async with open_client(broker_url) as client:
        yield client
