"""docs/security.md's table of routes and the role each requires is the route table itself."""

from __future__ import annotations

from pathlib import Path

from reginamq.http.routes import ROUTES

SECURITY_MD = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_roles_table_in_docs_is_the_route_table():
    rows = [f"| {route.method} | `{route.pattern}` | {route.role} |" for route in ROUTES]
    table = "\n".join(["| Method | Path | Role |", "|---|---|---|", *rows])
    documented = SECURITY_MD.read_text()
    assert f"\n{table}\n\n" in documented, f"docs/security.md: replace the route table with\n{table}"
