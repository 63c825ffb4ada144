"""Fixtures of the library tests: one in-process broker (``reginamq.Broker``) for the session,
on the session's PostgreSQL beside the session's HTTP broker, its elected loops left to that
broker (``maintenance=False``), as an application beside a broker fleet would run it."""

from __future__ import annotations

import pytest

from reginamq import Broker
from tests.conftest import MEMBERS, spool_dir


@pytest.fixture(scope="session")
async def library(database_url):
    urls = MEMBERS.get(database_url, [database_url])
    async with Broker(urls, maintenance=False, process_metrics=False, environ={}, spool_dir=spool_dir(),
                      maintenance_interval=0.3) as broker:
        yield broker
