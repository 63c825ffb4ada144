"""Answers over several member databases that leave some out. An operator's read that lists or
counts over every member (resources, consumer-group lag, DLQ and message pages, statistics,
traces) answers from the members it reaches, so that one member down takes only its own rows
out of those answers (store/merging.py, ``on_reached``). The HTTP layer opens a collection
around each request with :func:`members_left_out` and names the members left out in the
``X-Reginamq-Members-Unreached`` header of the answer (docs/shards.md, "Failure of one
member")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from reginamq.store.merging import unreached

HEADER = "X-Reginamq-Members-Unreached"


@contextlib.contextmanager
def members_left_out() -> Iterator[set[int]]:
    """The ordinals of the members the reads made inside the block could not reach."""
    left_out: set[int] = set()
    token = unreached.set(left_out)
    try:
        yield left_out
    finally:
        unreached.reset(token)


def header(left_out: set[int]) -> tuple[str, str]:
    """The answer's header naming the members ``left_out`` (by ordinal, the catalog being 0)."""
    return HEADER, ",".join(str(ordinal) for ordinal in sorted(left_out))
