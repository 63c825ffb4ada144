"""Queue lifecycle: configure (create or change, merge or replace) and delete."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from reginamq.common.errors import BadRequest
from reginamq.engine import options as queue_options
from reginamq.engine.names import check_name, check_queue_name

CURRENT_SQL = "SELECT options, namespace, task FROM rq_queues WHERE name = $1 FOR UPDATE"
UPSERT_SQL = """
INSERT INTO rq_queues (name, namespace, task, options) VALUES ($1, $2, $3, $4::jsonb)
ON CONFLICT (name) DO UPDATE
SET namespace = EXCLUDED.namespace, task = EXCLUDED.task, options = EXCLUDED.options, updated_at = now()
RETURNING id
"""
LOCK_NAME_SQL = "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))"
DELETE_SQL = "SELECT rq_delete_queue($1)"
CONFIG_CHANGED_SQL = "SELECT pg_notify('rq_config', $1)"


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


async def configure(conn, body: ConfigureBody) -> dict:
    queue = check_queue_name(body.queue)
    if body.mode not in ("merge", "replace"):
        raise BadRequest("mode must be 'merge' or 'replace'")
    namespace = None if body.namespace is None else check_name("namespace", body.namespace)
    task = None if body.task is None else check_name("task", body.task)
    changes = queue_options.validate(body.options)
    async with conn.transaction():
        await conn.execute(LOCK_NAME_SQL, queue)  # serialises a first configure of a new name
        current = await conn.fetchrow(CURRENT_SQL, queue)
        if current is None:
            stored, (old_namespace, old_task) = None, derived_namespace_task(queue)
        else:
            stored, old_namespace, old_task = orjson.loads(current[0]), current[1], current[2]
        merged = queue_options.merge(stored, changes, body.mode)
        namespace = old_namespace if namespace is None else namespace
        task = old_task if task is None else task
        queue_id = await conn.fetchval(UPSERT_SQL, queue, namespace, task, orjson.dumps(merged).decode())
        await conn.execute(CONFIG_CHANGED_SQL, queue)  # delivered at commit, to every broker process
    return {"configured": True, "queueId": str(queue_id), "queue": queue, "namespace": namespace,
            "task": task, "options": merged}


async def delete(conn, queue: str) -> dict:
    """A queue created again after this starts from defaults (and from the namespace and task
    its name derives), so every process drops what it caches of it, as after a configure."""
    async with conn.transaction():
        deleted = await conn.fetchval(DELETE_SQL, check_queue_name(queue))
        if deleted:
            await conn.execute(CONFIG_CHANGED_SQL, queue)
    return {"deleted": bool(deleted), "queue": queue}
