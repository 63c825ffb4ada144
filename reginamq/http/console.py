"""The web console: the static files of ``reginamq/console``, served from memory.

The files are read once, when this module is imported, into a table keyed by their path
relative to the console folder. A request can only name an entry of that table, so no part
of a URL ever reaches the file system: ``..``, encoded slashes or absolute paths simply are
not keys (404). The console is a page of plain ES modules that reads the broker's JSON API
from the browser; nothing is built at install time and nothing is fetched from the internet.
"""

from __future__ import annotations

from pathlib import Path

from reginamq.engine.broker import Broker
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import PUBLIC

ROOT = Path(__file__).resolve().parent.parent / "console"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    "": "text/plain; charset=utf-8",  # LICENSE files of vendored libraries
}


def load(root: Path) -> dict[str, tuple[bytes, str]]:
    """Every servable file under ``root``: relative POSIX path -> (bytes, content type)."""
    return {path.relative_to(root).as_posix(): (path.read_bytes(), CONTENT_TYPES[path.suffix])
            for path in sorted(root.rglob("*")) if path.is_file() and path.suffix in CONTENT_TYPES}


FILES = load(ROOT)


async def index(broker: Broker, request: Request) -> responses.Response:
    return responses.text(200, *FILES["index.html"])


async def asset(broker: Broker, request: Request) -> responses.Response:
    found = FILES.get(request.path_params["path"])
    if found is None:
        return responses.error(404, "no such console file")
    return responses.text(200, *found)


ROUTES: list = [
    ("GET", "/", index, PUBLIC),
    ("GET", "/console/{path*}", asset, PUBLIC),
]
