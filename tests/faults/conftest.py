"""Fault tests: each starts its own broker (and, where it breaks the database, its own
PostgreSQL), injects one fault under load, and asserts that nothing acknowledged was lost.
Most run ``reginamq bench --verify`` against it and assert the verifier's counters: 0 lost,
0 reordered, 0 phantoms, no unexplained duplicate."""

from __future__ import annotations

import pytest

from tests.conftest import stop_process
from tests.faults.helpers import start_broker_on


def pytest_collection_modifyitems(items) -> None:
    """Every fault test in one group: under xdist they run in one session, one after another,
    so that no two fault loads run at once."""
    for item in items:
        if "tests/faults/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.xdist_group("faults"))


@pytest.fixture
def broker(database_url, tmp_path):
    """A broker of this test alone (two workers) on the session database: (process, url)."""
    log_path = tmp_path / "broker.log"
    process, url = start_broker_on(database_url, log_path=log_path)
    try:
        yield process, url
    finally:
        stop_process(process)
