"""Which deduplication keys are kept in runs, and in which bucket (rq_dedup_runs,
001_queues_and_partitions.sql, says why runs).

A transactionId written the way UUIDv7s are minted (lowercase hex, hyphenated, version 7,
variant 10) goes to a run; its bucket is the first 40 bits of the key's own timestamp, its
first ten hex digits (256 ms). Every other key is kept a row a key. The rule reads the key
alone, never the time of the push, so a retry hours later looks where the first push wrote;
``rq_uuid7_bucket`` repeats it in SQL for the statements that meet one key, and the tests
hold the two to the same answers. The broker decides, not PostgreSQL: a pattern match per key
in SQL would cost about as much as the row the run saves.
"""

from __future__ import annotations

import re

from reginamq.store.columns import join_names

_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def bucket(txid: str) -> str | None:
    """The run bucket of the key ``txid``, or None when it is kept a row a key."""
    return txid[:8] + txid[9:11] if _UUID7.fullmatch(txid) else None


def join_buckets(txids: list[str]) -> str:
    """Each key's bucket as one column for ``split_optional_names`` (a gap for a row key)."""
    return join_names([bucket(txid) or "" for txid in txids])
