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

import contextlib
import inspect
import signal
import uuid

import pytest
from queen import Queen


def make_client(url: str, **options) -> Queen:
    """Build the client the way /work/shared/checks/queen_client_smoke.py does (plus ``options``)."""
    kwargs = dict(options)
    if "handle_signals" in inspect.signature(Queen.__init__).parameters:
        kwargs["handle_signals"] = False
    return Queen(url, **kwargs)


@contextlib.asynccontextmanager
async def open_client(url: str, **options):
    """A client for the block; pytest's signal handlers are put back when it closes."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    client = make_client(url, **options)
    try:
        yield client
    finally:
        await client.close()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
async def queen(broker_url):
    async with open_client(broker_url) as client:
        yield client


@pytest.fixture
def queue2() -> str:
    """A second queue name no other test uses."""
    return f"q2-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"
