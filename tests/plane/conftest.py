"""Fixtures of the two-driver suite: ``plane`` runs each case once over HTTP (the session's
broker, two worker processes) and once through the library (a ``reginamq.Broker`` in this
process on the same database), so what a case asserts holds for both doors."""

from __future__ import annotations

import httpx
import pytest

from reginamq import Broker
from tests.conftest import MEMBERS, spool_dir
from tests.plane.driver import HttpPlane, Plane


@pytest.fixture(scope="session")
async def plane_library(database_url):
    """The library's broker for the session, its elected loops left to the HTTP broker."""
    urls = MEMBERS.get(database_url, [database_url])
    async with Broker(urls, maintenance=False, process_metrics=False, environ={}, spool_dir=spool_dir()) as broker:
        yield broker


@pytest.fixture
async def http_plane(broker_url):
    async with httpx.AsyncClient(base_url=broker_url, timeout=60) as client:
        yield HttpPlane(client)


@pytest.fixture(params=["http", "library"])
def plane(request) -> Plane:
    if request.param == "http":
        return request.getfixturevalue("http_plane")
    return request.getfixturevalue("plane_library")
