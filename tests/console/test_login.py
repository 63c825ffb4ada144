"""With access control on, the console asks for a token, keeps it in the tab, sends it on every
API call, and asks again when the broker refuses it; the page itself is public and secret-free."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.auth_helpers import SECRET, mint
from tests.console.conftest import console_tab


@pytest.fixture
def auth_page(chromium, auth_broker, request):
    url, _log = auth_broker
    with console_tab(chromium, url, request.node.name) as tab:
        yield tab


def sign_in(page, token: str) -> None:
    page.locator("#login-token").fill(token)
    page.locator("#login").get_by_role("button", name="Sign in").click()


def test_the_console_asks_for_a_token_and_sends_it_on_every_call(auth_page):
    page = auth_page
    calls: list[tuple[str, str | None]] = []
    page.on("request", lambda r: calls.append((r.url, r.headers.get("authorization"))) if "/api/" in r.url else None)
    page.goto("/")
    login = page.locator("#login")
    expect(login).to_be_visible()

    sign_in(page, "not-a-token")
    expect(login).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("refused")

    token = mint("read-only", sub="console-user")
    calls.clear()
    sign_in(page, token)
    expect(login).to_be_hidden()
    expect(page.locator(".kpi").first).to_contain_text("Queues")
    assert calls and all(header == f"Bearer {token}" for _url, header in calls)
    assert page.evaluate("sessionStorage.getItem('reginamq.token')") == token
    html = page.content()
    assert token not in html and SECRET not in html


def test_a_refused_token_brings_the_login_back(auth_page):
    page = auth_page
    page.goto("/")
    sign_in(page, mint("admin", lifetime=2))
    expect(page.locator("#login")).to_be_hidden()
    page.evaluate(f"sessionStorage.setItem('reginamq.token', {mint('admin', lifetime=-120)!r})")
    page.reload()
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("refused")

    page.locator("#login").get_by_role("button", name="Sign in").click()  # empty: the form insists
    expect(page.locator("#login")).to_be_visible()
