"""Strict JSON (reginamq/common/jsonlimits.py): the nesting limit falls exactly on MAX_DEPTH
whatever mix of arrays and objects, whitespace or body size, and a check leaves nothing behind
that changes the next one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reginamq.common import jsonlimits
from reginamq.common.errors import BadRequest


def depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(child) for child in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(child) for child in value), default=0)
    return 0


def nested(kinds: list[bool], leaf: object, siblings: int) -> object:
    """Arrays (True) and objects (False) inside each other, outermost first, with scalar
    siblings at every level."""
    value = leaf
    for is_array in reversed(kinds):
        value = [*range(siblings), value] if is_array else {**{f"s{i}": i for i in range(siblings)}, "n": value}
    return value


@given(kinds=st.lists(st.booleans(), min_size=jsonlimits.MAX_DEPTH - 3, max_size=jsonlimits.MAX_DEPTH + 3),
       leaf=st.sampled_from([1, "[{", [], {}, None]), siblings=st.integers(0, 2), indent=st.sampled_from([None, 1]),
       padding=st.sampled_from([0, 20_000]))
def test_the_depth_limit_falls_on_max_depth(kinds, leaf, siblings, indent, padding):
    value = {"pad": "x" * padding, "v": nested(kinds, leaf, siblings)}
    body = json.dumps(value, indent=indent, separators=None if indent else (",", ":")).encode()
    if depth(value) > jsonlimits.MAX_DEPTH:
        with pytest.raises(BadRequest, match="nested deeper than 64"):
            jsonlimits.check(body)
    else:
        jsonlimits.check(body)


def test_a_refused_body_leaves_the_next_check_unaffected():
    deep = b"[" * 100 + b"]" * 100
    with pytest.raises(BadRequest, match="nested deeper"):
        jsonlimits.check(deep)
    with pytest.raises(BadRequest, match="duplicate key 'a'"):
        jsonlimits.check(b'{"a":1,"a":2}')
    jsonlimits.check(b"[" * 64 + b"]" * 64)
    jsonlimits.check(b'"' + b"[" * 500 + b'"')


@pytest.mark.parametrize("body", [b"1", b'"x"', b"null", b"[]", b"{}", b' {"a" : [1, 2] } '])
def test_shallow_and_scalar_bodies_pass(body):
    jsonlimits.check(body)
