"""The broker serves the console: the page, its files with the right content types, and
nothing outside the console folder whatever the path says."""

from __future__ import annotations

import re
import socket

import pytest

from reginamq.http import console


def raw_get(broker_url: str, path: str) -> tuple[int, bytes]:
    """A GET with the path sent exactly as written (HTTP clients normalise '..' away)."""
    host, port = broker_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_the_page_is_served_at_the_root(api):
    answer = api.get("/")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>reginamq console</title>" in answer.text


def test_every_file_the_page_and_its_modules_reference_is_served_with_its_type(api):
    expected = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
    index = api.get("/").text
    referenced = set(re.findall(r'(?:href|src)="(/console/[^"]+)"', index))
    assert "/console/js/app.js" in referenced and "/console/vendor/uplot/uPlot.iife.min.js" in referenced
    for path in sorted(referenced):
        answer = api.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith(expected[path[path.rindex("."):]]), path
    # The modules import each other by relative path; every import names a shipped file.
    for module in [p for p in console.FILES if p.endswith(".js") and not p.startswith("vendor/")]:
        folder = module.rsplit("/", 1)[0]
        for target in re.findall(r'from "(\.{1,2}/[^"]+)"', console.FILES[module][0].decode()):
            parts = [*folder.split("/"), *target.split("/")]
            resolved: list[str] = []
            for part in parts:
                if part == "..":
                    resolved.pop()
                elif part != ".":
                    resolved.append(part)
            assert "/".join(resolved) in console.FILES, f"{module} imports {target}, which is not shipped"


def test_the_vendored_chart_library_ships_with_its_license(api):
    answer = api.get("/console/vendor/uplot/LICENSE")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert "MIT License" in answer.text


@pytest.mark.parametrize("path", [
    "/console/../pyproject.toml",
    "/console/../../etc/passwd",
    "/console/..%2f..%2fetc%2fpasswd",
    "/console/%2e%2e/http/console.py",
    "/console/%2e%2e%2fhttp%2fconsole.py",
    "/console//etc/passwd",
    "/console/js/../../http/console.py",
    "/console/..\\..\\pyproject.toml",
    "/console/js",
    "/console/nothing.js",
])
def test_no_path_reaches_outside_the_console_files(broker_url, path):
    status, body = raw_get(broker_url, path)
    assert status in (400, 404), (path, status)
    assert b"[build-system]" not in body and b"root:" not in body and b"def asset" not in body


def test_the_table_holds_only_console_files():
    assert "index.html" in console.FILES
    assert all(not path.startswith(("/", "..")) and "/../" not in path for path in console.FILES)
    assert all(content_type in console.CONTENT_TYPES.values() for _body, content_type in console.FILES.values())
