"""Electing the one process (across all workers and nodes) that runs a background loop.

The election is a lease row: a process holds the loop while it keeps renewing the row; when
it dies the lease expires and another process takes over within ``LEASE_SECONDS``. The row is
the authority, so two processes never run the loop at the same time for longer than a
renewal that is already late.
"""

from __future__ import annotations

import os
import socket
import uuid

LEASE_SECONDS = 15
TAKE_SQL = "SELECT rq_take_leader_lease($1, $2, $3)"


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def take(conn, name: str, holder: str) -> bool:
    return bool(await conn.fetchval(TAKE_SQL, name, holder, LEASE_SECONDS))
