"""Queue configuration, deletion and the defaults a queue and a group get when nobody says,
over HTTP and through the library (ported from tests/conformance/test_client_configure.py and
test_client_defaults.py; the client's own QUEUE_DEFAULTS are the client's, not ported)."""

from __future__ import annotations

import pytest

from reginamq.library import QueueFull, QueueOptions
from tests.conftest import backdate_segments, stored_for
from tests.plane.helpers import data, pop_now, pop_until

TWO_HOURS = 7200


async def test_configure_answers_the_complete_option_set(plane, queue):
    config = await plane.configure(queue, QueueOptions(lease_time=7, retry_limit=2, dedup_window_seconds=120))

    assert config.configured and config.queue == queue and config.queue_id
    options = config.options
    assert (options["leaseTime"], options["retryLimit"], options["dedupWindowSeconds"]) == (7, 2, 120)
    # the defaults of what was not given
    assert (options["priority"], options["maxSize"], options["ttl"], options["retryDelay"]) == (0, 0, 0, 1000)
    assert options["deadLetterQueue"] is True and options["encryptionEnabled"] is False


async def test_configure_without_options_takes_the_defaults(plane, queue):
    config = await plane.configure(queue)

    assert (config.options["leaseTime"], config.options["retryLimit"]) == (300, 3)


async def test_a_queue_created_by_its_first_push_gets_a_shorter_lease(plane, queue):
    await plane.push(queue, [1])

    config = await plane.configure(queue, {})

    assert config.options["leaseTime"] == 60


async def test_namespace_and_task_are_echoed(plane, queue):
    config = await plane.configure(queue, {"leaseTime": 5}, namespace="billing", task="invoices")

    assert (config.namespace, config.task, config.options["leaseTime"]) == ("billing", "invoices", 5)


async def test_merge_keeps_what_is_not_given_and_replace_resets_it(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=9, retry_limit=1))

    merged = await plane.configure(queue, QueueOptions(retry_limit=5))
    assert (merged.options["leaseTime"], merged.options["retryLimit"]) == (9, 5)

    reset_one = await plane.configure(queue, QueueOptions(lease_time=None))
    assert (reset_one.options["leaseTime"], reset_one.options["retryLimit"]) == (300, 5)

    replaced = await plane.configure(queue, QueueOptions(lease_time=11), mode="replace")
    assert (replaced.options["leaseTime"], replaced.options["retryLimit"]) == (11, 3)


async def test_delayed_processing_holds_messages_back(plane, queue):
    await plane.configure(queue, QueueOptions(delayed_processing=1))
    await plane.push(queue, [{"n": 1}])

    assert await pop_now(plane, queue) == []
    assert data(await pop_until(plane, queue)) == [{"n": 1}]


async def test_delete_removes_the_queue_and_its_messages_once(plane, queue):
    await plane.configure(queue)
    await plane.push(queue, [0, 1, 2])

    deleted = await plane.delete_queue(queue)

    assert (deleted.deleted, deleted.queue) == (True, queue)
    assert await pop_now(plane, queue) == []
    assert (await plane.delete_queue(queue)).deleted is False


async def test_a_push_after_delete_starts_a_fresh_queue(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=9))
    await plane.push(queue, [{"old": True}])
    await plane.delete_queue(queue)

    await plane.push(queue, [{"new": True}])

    assert data(await pop_now(plane, queue)) == [{"new": True}]
    assert (await plane.configure(queue, {})).options["leaseTime"] == 60


async def test_a_push_into_a_full_queue_is_refused_whole(plane, queue):
    await plane.configure(queue, QueueOptions(max_size=2))
    await plane.push(queue, [1, 2])

    with pytest.raises(QueueFull) as refused:
        await plane.push(queue, [3])

    assert refused.value.status == 409 and refused.value.extra["code"] == "queue_full"
    assert [(q["queue"], q["maxSize"], q["size"]) for q in refused.value.queues] == [(queue, 2, 2)]
    assert data(await pop_now(plane, queue)) == [1, 2]


async def test_ttl_drops_what_waited_too_long(plane, queue, db):
    await plane.configure(queue, QueueOptions(ttl=1))
    await plane.push(queue, ["stale"])
    await stored_for(db, queue, 1)
    await plane.push(queue, ["fresh"])

    assert data(await pop_now(plane, queue)) == ["fresh"]


async def test_no_ttl_means_an_old_message_is_still_delivered(plane, queue, group, db):
    await plane.configure(queue)
    await plane.push(queue, ["old-1", "old-2"])
    await backdate_segments(db, queue, TWO_HOURS)

    assert data(await pop_now(plane, queue, auto_ack=True)) == ["old-1", "old-2"]
    assert data(await pop_now(plane, queue, group=group)) == ["old-1", "old-2"]


async def test_an_explicit_ttl_skips_older_messages(plane, queue, group, db):
    await plane.configure(queue, QueueOptions(ttl=600))
    await plane.push(queue, ["stale-1", "stale-2"])
    await backdate_segments(db, queue, TWO_HOURS)
    await plane.push(queue, ["fresh"])

    assert data(await pop_now(plane, queue, auto_ack=True)) == ["fresh"]
    assert data(await pop_now(plane, queue, group=group)) == ["fresh"]


# ---------------------------------------------------------------- where a new group starts


async def test_a_new_group_that_does_not_say_reads_only_what_comes_after_its_first_pop(plane, queue, group):
    await plane.push(queue, ["before-1", "before-2"])
    assert not await plane.pop(queue, group=group)  # registers the group at this instant
    await plane.push(queue, ["after"])

    assert data((await plane.pop(queue, group=group)).messages) == ["after"]


async def test_a_group_that_asks_for_all_reads_the_backlog(plane, queue, group):
    await plane.push(queue, ["before-1", "before-2"])

    assert data((await plane.pop(queue, group=group, subscription_mode="all")).messages) == ["before-1", "before-2"]


async def test_a_partition_created_after_the_group_registered_is_read_from_its_beginning(plane, queue, group):
    await plane.push(queue, ["a-before"], partition="a")
    assert not await plane.pop(queue, group=group, partitions=10)
    await plane.push(queue, ["b-1", "b-2"], partition="b")
    await plane.push(queue, ["a-after"], partition="a")

    got: dict[str, list] = {}
    for message in (await plane.pop(queue, group=group, partitions=10, batch=50)).messages:
        got.setdefault(message.partition, []).append(message.data)
    assert got == {"a": ["a-after"], "b": ["b-1", "b-2"]}
