"""The OpenAPI document describes every route of the route table, and only those."""

from __future__ import annotations

import json

import pytest

from reginamq.http import openapi
from reginamq.http.routes import ROUTES, Route


def test_every_route_is_in_the_document():
    paths = json.loads(openapi.document(ROUTES))["paths"]
    for method, pattern, _handler, _role in ROUTES:
        operation = paths.get(openapi.openapi_path(pattern), {}).get(method.lower())
        assert operation is not None, f"{method} {pattern} is missing from /openapi.json"
        assert operation["responses"], f"{method} {pattern} documents no answers"
    described = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert described == {(method, openapi.openapi_path(pattern)) for method, pattern, *_ in ROUTES}


def test_a_route_without_a_description_fails_the_build():
    undocumented = Route("GET", "/api/v1/undocumented", None, "admin")
    with pytest.raises(KeyError):
        openapi.document([*ROUTES, undocumented])


def test_path_parameters_are_declared():
    paths = json.loads(openapi.document(ROUTES))["paths"]
    for path, item in paths.items():
        names = {segment[1:-1] for segment in path.split("/") if segment.startswith("{")}
        for operation in item.values():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == names, path


async def test_served(http):
    response = await http.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["openapi"].startswith("3.1")


def test_every_operation_states_the_role_its_route_requires():
    document = json.loads(openapi.document(ROUTES))
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for method, pattern, _handler, role in ROUTES:
        operation = document["paths"][openapi.openapi_path(pattern)][method.lower()]
        assert operation["x-required-role"] == role, f"{method} {pattern}"
        if role == "public":
            assert operation["security"] == [], f"{method} {pattern}"
        else:
            assert operation["security"] == [{"bearer": []}], f"{method} {pattern}"
            assert {"401", "403"} <= set(operation["responses"]), f"{method} {pattern}"
