"""Fixtures of the engine and store tests."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.engine.helpers import TEMPLATES


@pytest.fixture(scope="session", autouse=True)
def member_templates(database_url):
    """Drops the template databases the member databases of the session were copied from, while
    the session's PostgreSQL (``database_url``, torn down after this) still runs."""
    yield
    async def drop() -> None:
        for database_url, name in TEMPLATES.items():
            admin = await asyncpg.connect(database_url)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()

    asyncio.run(drop())
    TEMPLATES.clear()
