import pytest

from reginamq.common.errors import BadRequest
from reginamq.engine.ack import normalise_status
from reginamq.engine.names import QUEUE_MODE, check_name, check_queue_name, check_uuid, group_or_queue_mode
from reginamq.engine.queues import derived_namespace_task


@pytest.mark.parametrize("status", [None, "completed", "success", "acked", "ok"])
def test_completed_synonyms(status):
    assert normalise_status(status) == "completed"


@pytest.mark.parametrize(("status", "meaning"),
                         [("retry", "retry"), ("dlq", "dlq"), ("failed", "failed"), ("nack", "failed"),
                          ("Completed", "failed"), ("RETRY", "failed")])
def test_statuses_are_case_sensitive(status, meaning):
    assert normalise_status(status) == meaning


@pytest.mark.parametrize("bad", ["", "x" * 256, "a\nb", "tab\there", "\x00", 5, None])
def test_bad_names_are_refused(bad):
    with pytest.raises(BadRequest):
        check_name("queue", bad)


@pytest.mark.parametrize("good", ["orders", "a.b.c", "x" * 255, "ünïcødé", "with space", "a/b"])
def test_good_names_pass_unchanged(good):
    assert check_name("queue", good) == good


def test_queue_names_refuse_slashes_partitions_do_not():
    with pytest.raises(BadRequest):
        check_queue_name("a/b")
    assert check_name("partition", "tenant/42") == "tenant/42"


def test_missing_group_means_queue_mode():
    assert group_or_queue_mode(None) == QUEUE_MODE
    assert group_or_queue_mode("") == QUEUE_MODE
    assert group_or_queue_mode("billing") == "billing"


def test_uuid_check_normalises_and_refuses():
    assert check_uuid("leaseId", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11") == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    with pytest.raises(BadRequest):
        check_uuid("leaseId", "not-a-uuid")


@pytest.mark.parametrize(("name", "expected"),
                         [("a.b.c", ("a", "b")), ("a.b", ("a", "b")), ("plain", (None, None)),
                          (".b", (None, "b"))])
def test_dotted_names_derive_namespace_and_task(name, expected):
    assert derived_namespace_task(name) == expected
