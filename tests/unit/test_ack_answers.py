"""The ack answer (reginamq/engine/ack.py AckAnswers): rendered from a template for released
spans and from rq_ack's rows for the rest, it reads and renders exactly as the protocol objects
would, and a fused call's answers split back per request re-indexed."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from reginamq.engine.ack import AckAnswers

rows = st.tuples(st.booleans(), st.none() | st.text(max_size=20), st.booleans(), st.booleans(), st.booleans())


@st.composite
def answers(draw) -> AckAnswers:
    txids = draw(st.lists(st.text(min_size=1, max_size=12), max_size=30))
    indexes = draw(st.sets(st.integers(0, max(len(txids) - 1, 0)), max_size=len(txids)) if txids else st.just(set()))
    return AckAnswers(txids, {index: draw(rows) for index in indexes})


def expected(answer: AckAnswers) -> list[dict]:
    objects = []
    for index, txid in enumerate(answer.txids):
        success, error, released, dlq, noop = answer.rows.get(index, (True, None, True, False, False))
        objects.append({"index": index, "transactionId": txid, "success": success, "error": error,
                        "leaseReleased": released, "dlq": dlq, "noop": noop})
    return objects


@given(answers())
def test_render_reads_and_counts_agree_with_the_protocol_objects(answer):
    objects = expected(answer)
    assert orjson.loads(answer.render()) == objects
    assert list(answer) == objects
    assert [answer[index] for index in range(len(answer))] == objects
    if objects:
        assert answer[-1] == objects[-1]
    assert answer.failed() == sum(1 for o in objects if not o["success"])
    assert answer.dead_lettered() == sum(1 for o in objects if o["success"] and o["dlq"])


@given(answers(), st.data())
def test_a_part_is_its_items_indexed_from_zero(answer, data):
    start = data.draw(st.integers(0, len(answer)))
    size = data.draw(st.integers(0, len(answer) - start))
    part = answer.part(start, size)
    assert [{**o, "index": o["index"] + start} for o in part] == expected(answer)[start:start + size]
    assert orjson.loads(part.render()) == list(part)
