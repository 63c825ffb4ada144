"""GET /health."""

from __future__ import annotations


async def test_health(http):
    response = await http.get("/health")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == "healthy"
    assert body["database"] == "connected"
