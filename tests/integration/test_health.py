"""GET /health (readiness) and GET /status (liveness, as Queen serves it)."""

from __future__ import annotations


async def test_health(http):
    response = await http.get("/health")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == "healthy"
    assert body["database"] == "connected"


async def test_status_is_queens_liveness_answer(http):
    response = await http.get("/status")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"status": "ok", "engine": "reginamq"}
