"""Fixtures of the engine and store tests."""

from __future__ import annotations

import pytest

from tests.conftest import query
from tests.engine.helpers import TEMPLATES


@pytest.fixture(scope="session", autouse=True)
def member_templates(database_url):
    """Drops the template databases the member databases of the session were copied from, while
    the session's PostgreSQL (``database_url``, torn down after this) still runs."""
    yield
    for session_url, name in TEMPLATES.items():
        query(session_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    TEMPLATES.clear()
