"""The verifier itself: it must see a loss, a reorder, a phantom and an unexplained duplicate."""

from __future__ import annotations

from reginamq.bench.config import BenchConfig, partition_name
from reginamq.bench.verify import FAILED, LEASE, OK, SeqSet, Verifier

P = partition_name(0)


def verifier(*records, sent=10, unconfirmed=()) -> dict:
    v = Verifier(BenchConfig(rate=1, partitions=1, producer_procs=1, consumer_procs=1, verify=True))
    v.add({"producer": 0, "ledger": {0: (sent, list(unconfirmed))}})
    v.add({"records": [("__QUEUE_MODE__", P, t, c, 1, runs) for t, c, runs in records]})
    return v.results()["groups"]["__QUEUE_MODE__"]


def test_a_clean_stream_with_a_lease_redelivery():
    g = verifier((1, "a", [(0, 0, 4, LEASE)]), (2, "b", [(0, 0, 9, OK)]))
    assert (g["lost"], g["reordered"], g["phantoms"], g["dup_other"]) == (0, 0, 0, 0)
    assert (g["duplicates"], g["dup_lease"], g["redelivered_elsewhere"]) == (5, 5, 1)


def test_a_failed_ack_explains_its_duplicates():
    g = verifier((1, "a", [(0, 0, 4, FAILED)]), (2, "a", [(0, 0, 9, OK)]))
    assert (g["dup_failed_ack"], g["dup_other"], g["lost"]) == (5, 0, 0)


def test_loss_reorder_phantom_and_unexplained_duplicate_are_seen():
    assert verifier((1, "a", [(0, 0, 8, OK)]))["lost"] == 1
    g = verifier((1, "a", [(0, 0, 4, OK), (0, 6, 9, OK)]), (2, "a", [(0, 5, 5, OK)]))
    assert g["reordered"] == 1 and g["lost"] == 0
    assert verifier((1, "a", [(0, 0, 4, OK), (0, 6, 9, OK)]))["reordered"] == 1  # 5 skipped, never came
    assert verifier((1, "a", [(0, 0, 9, OK), (0, 10, 10, OK)]))["phantoms"] == 1
    assert verifier((1, "a", [(0, 0, 9, OK)]), (2, "a", [(0, 3, 3, OK)]))["dup_other"] == 1
    assert verifier((1, "a", [(0, 0, 5, OK), (0, 2, 9, OK)]))["reordered"] == 1  # backwards inside one pop


def test_unconfirmed_pushes_may_be_missing_or_present():
    g = verifier((1, "a", [(0, 0, 4, OK), (0, 7, 9, OK)]), unconfirmed=(5, 6))
    assert (g["lost"], g["reordered"], g["accepted"]) == (0, 0, 8)
    g = verifier((1, "a", [(0, 0, 9, OK)]), unconfirmed=(5, 6))
    assert (g["unconfirmed_delivered"], g["phantoms"]) == (2, 0)


def test_seqset():
    s = SeqSet()
    s.add_range(5, 7)
    s.add_range(0, 4)
    s.add_range(9, 9)
    assert s.prefix == 8 and s.extra == {9} and 9 in s and 8 not in s
