"""Fuzz every route against the broker's own OpenAPI document (GET /openapi.json).

One test per operation of the document, i.e. per route of ROUTES (tests/contract/test_openapi.py
checks the two agree), against the session's real broker and database. Checks: no 5xx,
every status code documented, the documented Content-Type, the body valid against its
schema. Schemathesis's default phases run (explicit examples, coverage of boundaries and
invalid values, random fuzzing; not the stateful phase), ``MAX_EXAMPLES`` fuzzed cases per
operation, so the whole file stays within about two minutes.

Nothing is excluded. Two things are bounded, not skipped:
- long polls: the schema allows ``timeout`` up to 3,600,000 ms; a fuzzed pop with
  ``wait`` true gets its timeout lowered to at most ``LONG_POLL_MS`` before it is sent.
- destructive routes (DELETE of queues, groups, messages, dead letters) run with fuzzed
  names; every other test uses its own random names, so they cannot collide.
"""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from reginamq.http.openapi import document
from reginamq.http.routes import ROUTES

# REGINAMQ_FUZZ_EXAMPLES raises it for a longer run by hand (100 per operation and mode: ~2.5 min).
MAX_EXAMPLES = int(os.environ.get("REGINAMQ_FUZZ_EXAMPLES", "15"))
LONG_POLL_MS = 200
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# The document the broker serves (test_served_document_is_the_fuzzed_one checks it is the same).
SCHEMA = schemathesis.openapi.from_dict(json.loads(document(ROUTES)))
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
# Invalid input needs an input to break: operations with no parameters and no body are
# fuzzed in positive mode only (there is nothing negative to generate for them).
CASES = [pytest.param(operation, mode, id=f"{operation.label}-{mode.value}")
         for operation in OPERATIONS for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode is GenerationMode.POSITIVE or operation.path_parameters or operation.query or operation.body]


def test_served_document_is_the_fuzzed_one(broker_url):
    import httpx

    response = httpx.get(f"{broker_url}/openapi.json")
    assert response.status_code == 200
    assert response.json() == json.loads(document(ROUTES))


def bound_long_polls(case) -> None:
    if "/pop" not in case.operation.path or not isinstance(case.query, dict):
        return
    try:
        timeout = int(case.query.get("timeout", LONG_POLL_MS))
    except (TypeError, ValueError):
        return  # not an integer: the broker answers 400 without waiting
    if timeout >= 0:
        case.query["timeout"] = min(timeout, LONG_POLL_MS)


@pytest.mark.parametrize(("operation", "mode"), CASES)
def test_api(operation, mode, broker_url):
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def fuzz(case):
        bound_long_polls(case)
        case.call_and_validate(base_url=broker_url, checks=CHECKS, timeout=30)

    fuzz()
