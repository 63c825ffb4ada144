"""A real headless Chromium (Debian's ``chromium`` package) driven by Playwright against the
session's real broker. Each test gets a fresh browser context and leaves a full-page
screenshot in ``test-artifacts/console/<test name>.png`` at the repository root.

A missing Chromium fails these tests (it does not skip them): `.ci/run` installs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

import httpx
import pytest

CHROMIUM = os.environ.get("REGINAMQ_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def chromium(broker_url):
    """One browser per module. Playwright's sync API keeps an event loop running in this thread
    while it is open, so it starts after the session's database and broker (whose fixtures run
    asyncio.run) and stops before the next module, whose asyncio tests need the thread's loop."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), (
        f"Chromium not found at {CHROMIUM}: install Debian's package (apt-get install -y chromium) "
        "or point REGINAMQ_TEST_CHROMIUM at a Chromium binary")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def console_tab(chromium, base_url: str, test_name: str):
    """A fresh browser context on ``base_url``; a screenshot at the end; page errors fail the test."""
    context = chromium.new_context(base_url=base_url, viewport={"width": 1440, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        file_name = re.sub(r"[^\w.-]+", "_", test_name) + ".png"
        tab.screenshot(path=str(ARTIFACTS / file_name), full_page=True)
        context.close()
    assert not errors, f"the console raised: {errors}"


@pytest.fixture
def page(chromium, broker_url, request):
    """A console tab on the session broker."""
    with console_tab(chromium, broker_url, request.node.name) as tab:
        yield tab


@pytest.fixture
def api(broker_url):
    with httpx.Client(base_url=broker_url, timeout=30) as client:
        yield client


@pytest.fixture
def name() -> str:
    """A queue name no other test uses (the console tests are synchronous: no asyncio fixtures)."""
    return f"console-{uuid.uuid4().hex[:10]}"


def push(api: httpx.Client, queue: str, payloads: list, partition: str = "Default") -> list[dict]:
    answer = api.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "payload": payload} for payload in payloads]})
    assert answer.status_code == 201, answer.text
    return answer.json()
