"""Queue lifecycle: configure (create or change, merge or replace) and delete.

A configure reads the stored option set, merges the changes and writes the result in one
transaction that holds the queue's name and row, so two configures of one queue never lose
each other's changes. Both a configure and a delete tell every broker process at commit, so
each drops what it caches of the queue.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from reginamq.common.errors import BadRequest
from reginamq.engine import options as queue_options
from reginamq.engine.names import check_name, check_queue_name
from reginamq.store import Store


class ConfigureBody(msgspec.Struct):
    queue: str
    namespace: str | None = None
    task: str | None = None
    options: dict[str, Any] | None = None
    mode: str = "merge"


def derived_namespace_task(queue: str) -> tuple[str | None, str | None]:
    """A dotted name ``a.b.c`` belongs to namespace ``a`` and task ``b``."""
    if "." not in queue:
        return None, None
    parts = queue.split(".")
    return parts[0] or None, parts[1] or None


async def configure(store: Store, body: ConfigureBody) -> dict:
    queue = check_queue_name(body.queue)
    if body.mode not in ("merge", "replace"):
        raise BadRequest("mode must be 'merge' or 'replace'")
    namespace = None if body.namespace is None else check_name("namespace", body.namespace)
    task = None if body.task is None else check_name("task", body.task)
    changes = queue_options.validate(body.options)
    return await store.atomically(lambda tx: _configure(tx, queue, namespace, task, changes, body.mode))


async def _configure(tx: Store, queue: str, namespace: str | None, task: str | None, changes: dict[str, Any],
                     mode: str) -> dict:
    current = await tx.queues.lock(queue)  # the name too: two first configures of it take turns
    if current is None:
        stored, (old_namespace, old_task) = None, derived_namespace_task(queue)
    else:
        stored, old_namespace, old_task = orjson.loads(current[0]), current[1], current[2]
    merged = queue_options.merge(stored, changes, mode)
    namespace = old_namespace if namespace is None else namespace
    task = old_task if task is None else task
    queue_id = await tx.queues.upsert(queue, namespace, task, orjson.dumps(merged).decode())
    await tx.queues.announce(queue)
    return {"configured": True, "queueId": str(queue_id), "queue": queue, "namespace": namespace,
            "task": task, "options": merged}


async def delete(store: Store, queue: str) -> dict:
    """A queue created again after this starts from defaults (and from the namespace and task
    its name derives), so every process drops what it caches of it, as after a configure."""
    name = check_queue_name(queue)
    return await store.atomically(lambda tx: _delete(tx, name))


async def _delete(tx: Store, queue: str) -> dict:
    deleted = await tx.queues.delete(queue)
    if deleted:
        await tx.queues.announce(queue)
    return {"deleted": deleted, "queue": queue}
