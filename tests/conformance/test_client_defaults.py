"""Queen's defaults, through the official client: where a new consumer group starts reading when it
does not say (Queen's DEFAULT_SUBSCRIPTION_MODE, unset = ``new``), and a ``ttl`` nobody set
(Queen stores 3600 and never enforces it; here no ttl means no expiry).

A message cannot be made an hour old by waiting, so the ttl tests backdate the stored segments
through the ``db`` fixture (``backdate_segments``).
"""

from __future__ import annotations

import pytest

from tests.conformance.helpers import create_queue, open_client
from tests.conftest import backdate_segments, start_broker, stop_process

TWO_HOURS = 7200


async def pop_group(queen, queue: str, group: str, mode: str | None = None, partitions: int = 1) -> list[dict]:
    builder = queen.queue(queue).group(group)
    if mode is not None:
        builder = builder.subscription_mode(mode)
    return await builder.partitions(partitions).batch(50).wait(False).pop()


def data(messages: list[dict]) -> list:
    return [m["data"] for m in messages]


# ---------------------------------------------------------------- where a new group starts


async def test_a_new_group_that_does_not_say_reads_only_what_is_pushed_after_its_first_pop(queen, queue, group):
    await queen.queue(queue).push([{"data": "before-1"}, {"data": "before-2"}])
    assert await pop_group(queen, queue, group) == []  # registers the group at this instant
    await queen.queue(queue).push({"data": "after"})
    assert data(await pop_group(queen, queue, group)) == ["after"]


async def test_a_group_that_asks_for_all_reads_the_backlog(queen, queue, group):
    await queen.queue(queue).push([{"data": "before-1"}, {"data": "before-2"}])
    assert data(await pop_group(queen, queue, group, "all")) == ["before-1", "before-2"]


async def test_queue_mode_reads_everything(queen, queue):
    await queen.queue(queue).push([{"data": "before-1"}, {"data": "before-2"}])
    assert data(await queen.queue(queue).batch(50).wait(False).pop()) == ["before-1", "before-2"]


async def test_a_partition_created_after_the_group_registered_is_read_from_its_beginning(queen, queue, group):
    await queen.queue(queue).partition("a").push({"data": "a-before"})
    assert await pop_group(queen, queue, group, partitions=10) == []
    await queen.queue(queue).partition("b").push([{"data": "b-1"}, {"data": "b-2"}])
    await queen.queue(queue).partition("a").push({"data": "a-after"})
    got: dict[str, list] = {}
    for message in await pop_group(queen, queue, group, partitions=10):
        got.setdefault(message["partition"], []).append(message["data"])
    assert got == {"a": ["a-after"], "b": ["b-1", "b-2"]}


@pytest.fixture(scope="module")
def replaying_broker(database_url):
    """A broker started with Queen's DEFAULT_SUBSCRIPTION_MODE=all (one worker)."""
    process, url = start_broker(database_url, workers=1, extra_env={"DEFAULT_SUBSCRIPTION_MODE": "all"})
    try:
        yield url
    finally:
        stop_process(process)


async def test_a_broker_started_with_default_subscription_mode_all_replays_the_backlog(replaying_broker, queue):
    async with open_client(replaying_broker) as queen:
        await queen.queue(queue).push([{"data": "before-1"}, {"data": "before-2"}])
        assert data(await pop_group(queen, queue, "replayer")) == ["before-1", "before-2"]
        assert await pop_group(queen, queue, "newcomer", "new") == []  # a group that says still decides


# ---------------------------------------------------------------- ttl


async def listed(queen, queue: str) -> dict:
    (entry,) = [q for q in (await queen.admin.list_queues(search=queue))["queues"] if q["name"] == queue]
    return entry


async def test_a_message_older_than_the_default_ttl_is_still_delivered(queen, db, queue, queue2, group):
    await create_queue(queen, queue)  # created without options
    await queen.queue(queue2).push({"data": "pushed-into-being"})  # created by its first push
    await queen.queue(queue).push([{"data": "old-1"}, {"data": "old-2"}])
    for name in (queue, queue2):
        await backdate_segments(db, name, TWO_HOURS)

    assert data(await queen.queue(queue).batch(50).wait(False).pop()) == ["old-1", "old-2"]
    assert data(await pop_group(queen, queue, group, "all")) == ["old-1", "old-2"]
    assert data(await queen.queue(queue2).batch(50).wait(False).pop()) == ["pushed-into-being"]
    entry = await listed(queen, queue)
    assert entry["options"]["ttl"] == 0 and entry["expired"] == 0


async def test_a_message_older_than_an_explicit_ttl_is_skipped_and_counted_as_expired(queen, db, queue, group):
    await create_queue(queen, queue, ttl=600)
    await queen.queue(queue).push([{"data": "stale-1"}, {"data": "stale-2"}])
    await backdate_segments(db, queue, TWO_HOURS)
    await queen.queue(queue).push({"data": "fresh"})

    assert data(await queen.queue(queue).batch(50).wait(False).pop()) == ["fresh"]
    assert data(await pop_group(queen, queue, group, "all")) == ["fresh"]
    entry = await listed(queen, queue)  # two readers skipped two messages each
    assert entry["options"]["ttl"] == 600 and entry["expired"] == 4
    assert (await queen.admin.get_queue(queue))["expired"] == 4
