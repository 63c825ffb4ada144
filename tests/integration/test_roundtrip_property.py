"""Property: any JSON value pushed comes back from a pop as the same value, in push order."""

from __future__ import annotations

import asyncio

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.helpers import unique

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(JSON, min_size=1, max_size=8), partition=TEXT.filter(
    lambda s: s and "/" not in s and not any(ord(c) < 32 or ord(c) == 127 for c in s)))
def test_any_json_round_trips(broker_url, values, partition):
    async def scenario():
        queue = unique("prop")
        async with httpx.AsyncClient(base_url=broker_url, timeout=30) as http:
            response = await http.post("/api/v1/push", json={"items": [
                {"queue": queue, "partition": partition, "payload": v} for v in values]})
            assert response.status_code == 201, response.text
            assert [r["status"] for r in response.json()] == ["queued"] * len(values)
            response = await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 100})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["partition"] == partition
            assert [m["data"] for m in body["messages"]] == values
            await http.delete(f"/api/v1/resources/queues/{queue}")

    asyncio.run(scenario())
