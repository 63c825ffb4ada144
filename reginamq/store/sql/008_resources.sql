-- Resources: what is in the queues, read with aggregate SQL and paged, never a whole table
-- in the broker's memory. Offsets make depth arithmetic: a partition stores the messages
-- first..last_offset (first: rq_first_offset, log_start or past it); a cursor has consumed
-- everything <= committed. A queue's pending messages are the "worst cursor" rule's
-- (rq_pending, 003_pop.sql): what the least advanced cursor of each partition has not committed,
-- or its whole stored log when no one has read it yet.

-- When the message at p_offset was pushed (its segment's stamp); NULL when it is not stored.
-- Two index probes at most: the segment that starts at or below the offset, else the next.
CREATE OR REPLACE FUNCTION rq_message_created_at(p_partition uuid, p_offset bigint)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT CASE WHEN s.end_offset >= p_offset THEN s.created_at END
         FROM rq_segments s
         WHERE s.partition_id = p_partition AND s.base_offset <= p_offset
         ORDER BY s.base_offset DESC LIMIT 1),
        (SELECT s.created_at FROM rq_segments s
         WHERE s.partition_id = p_partition AND s.base_offset > p_offset
         ORDER BY s.base_offset LIMIT 1))
$$;

-- Where a consumer group stands on a partition: its cursor, or, when it has not read the
-- partition yet, where its durable subscription will seed the cursor (rq_seed_cursor):
-- no start instant (queue mode, 'all') = before the first stored message; a partition last
-- written before the instant = at its end.
CREATE OR REPLACE FUNCTION rq_effective_committed(
    p_partition uuid, p_log_start bigint, p_last_offset bigint, p_last_write_at timestamptz,
    p_committed bigint, p_sub_from timestamptz
) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_committed IS NOT NULL THEN greatest(p_committed, p_log_start - 1)
        WHEN p_sub_from IS NOT NULL AND (p_last_write_at IS NULL OR p_last_write_at < p_sub_from) THEN p_last_offset
        ELSE rq_seed_cursor(p_partition, p_log_start, p_last_offset, p_sub_from)
    END
$$;

-- The whole system in one row. Global aggregates join cursors grouped once, not probed per
-- partition.
CREATE OR REPLACE FUNCTION rq_res_overview()
RETURNS TABLE (queues bigint, partitions bigint, namespaces bigint, tasks bigint, messages bigint,
               pending bigint, in_flight bigint, consumer_groups bigint, subscriptions bigint,
               dlq bigint, last_write_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH parts AS (
        SELECT count(*) AS partitions,
               coalesce(sum(greatest(p.last_offset - f.first + 1, 0)), 0)::bigint AS messages,
               coalesce(sum(rq_pending(p.last_offset, p.log_start, f.first, c.done)), 0)::bigint AS pending,
               max(p.last_write_at) AS last_write_at
        FROM rq_partitions p
        CROSS JOIN LATERAL (SELECT rq_first_offset(p.id, p.log_start, p.last_offset) AS first) f
        LEFT JOIN (SELECT partition_id, min(committed) AS done FROM rq_consumers GROUP BY partition_id) c
               ON c.partition_id = p.id
    )
    SELECT (SELECT count(*) FROM rq_queues),
           parts.partitions,
           (SELECT count(DISTINCT namespace) FROM rq_queues),
           (SELECT count(DISTINCT task) FROM rq_queues),
           parts.messages,
           parts.pending,
           (SELECT coalesce(sum(greatest(c.span_end - greatest(c.span_start, c.committed + 1) + 1, 0)), 0)::bigint
            FROM rq_consumers c
            WHERE c.lease_id IS NOT NULL AND c.span_end IS NOT NULL AND c.lease_expires_at > now()),
           (SELECT count(DISTINCT name) FROM rq_consumer_groups),
           (SELECT count(*) FROM rq_consumer_groups),
           (SELECT count(*) FROM rq_dlq),
           parts.last_write_at
    FROM parts
$$;

-- One page of queues (by name) with per-queue partition aggregates, computed for the page only,
-- and the messages its readers skipped for outliving the queue's ttl (expired, summed over
-- readers). p_name picks one queue (the detail route).
CREATE OR REPLACE FUNCTION rq_res_queue_page(
    p_name text, p_namespace text, p_task text, p_search text, p_limit int, p_offset int
) RETURNS TABLE (id bigint, name text, namespace text, task text, options jsonb,
                 created_at timestamptz, updated_at timestamptz, partitions bigint, messages bigint,
                 pending bigint, last_write_at timestamptz, consumer_groups bigint, dlq bigint,
                 expired bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.name, q.namespace, q.task, q.options, q.created_at, q.updated_at,
           a.partitions, a.messages, a.pending, a.last_write_at,
           (SELECT count(*) FROM rq_consumer_groups g WHERE g.queue_id = q.id),
           (SELECT count(*) FROM rq_dlq d WHERE d.queue_id = q.id),
           (SELECT coalesce(sum(e.expired), 0) FROM rq_expired e WHERE e.queue_id = q.id)::bigint
    FROM (SELECT * FROM rq_queues q
          WHERE (p_name IS NULL OR q.name = p_name)
            AND (p_namespace IS NULL OR q.namespace = p_namespace)
            AND (p_task IS NULL OR q.task = p_task)
            AND (p_search IS NULL OR starts_with(q.name, p_search))
          ORDER BY q.name
          LIMIT p_limit OFFSET p_offset) q
    CROSS JOIN LATERAL (
        SELECT count(*) AS partitions,
               coalesce(sum(greatest(p.last_offset - f.first + 1, 0)), 0)::bigint AS messages,
               coalesce(sum(rq_pending(p.last_offset, p.log_start, f.first, c.done)), 0)::bigint AS pending,
               max(p.last_write_at) AS last_write_at
        FROM rq_partitions p
        CROSS JOIN LATERAL (SELECT rq_first_offset(p.id, p.log_start, p.last_offset) AS first) f
        LEFT JOIN LATERAL (SELECT min(c.committed) AS done FROM rq_consumers c WHERE c.partition_id = p.id) c
               ON true
        WHERE p.queue_id = q.id
    ) a
    ORDER BY q.name
$$;

CREATE OR REPLACE FUNCTION rq_res_queue_count(p_namespace text, p_task text, p_search text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM rq_queues q
    WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
      AND (p_task IS NULL OR q.task = p_task)
      AND (p_search IS NULL OR starts_with(q.name, p_search))
$$;

-- One page of partitions (of one queue, or of all queues), by queue name then partition name,
-- optionally only names starting with p_search.
CREATE OR REPLACE FUNCTION rq_res_partition_page(p_queue text, p_search text, p_limit int, p_offset int)
RETURNS TABLE (queue_name text, id uuid, name text, last_offset bigint, log_start bigint,
               last_write_at timestamptz, created_at timestamptz, messages bigint, pending bigint,
               cursors bigint, oldest_pending_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT y.queue_name, y.id, y.name, y.last_offset, y.first, y.last_write_at, y.created_at,
           greatest(y.last_offset - y.first + 1, 0), y.pending, y.cursors,
           CASE WHEN y.pending > 0 THEN rq_message_created_at(y.id, y.last_offset - y.pending + 1) END
    FROM (
        SELECT x.*,
               rq_pending(x.last_offset, x.log_start, x.first, c.done) AS pending,
               coalesce(c.cursors, 0) AS cursors
        FROM (
            SELECT q.name AS queue_name, p.id, p.name, p.last_offset, p.log_start,
                   rq_first_offset(p.id, p.log_start, p.last_offset) AS first, p.last_write_at, p.created_at
            FROM rq_queues q
            JOIN rq_partitions p ON p.queue_id = q.id
            WHERE (p_queue IS NULL OR q.name = p_queue)
              AND (p_search IS NULL OR starts_with(p.name, p_search))
            ORDER BY q.name, p.name
            LIMIT p_limit OFFSET p_offset
        ) x
        LEFT JOIN LATERAL (SELECT min(c.committed) AS done, count(*) AS cursors
                           FROM rq_consumers c WHERE c.partition_id = x.id) c ON true
    ) y
    ORDER BY y.queue_name, y.name
$$;

CREATE OR REPLACE FUNCTION rq_res_partition_count(p_queue text, p_search text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM rq_queues q JOIN rq_partitions p ON p.queue_id = q.id
    WHERE (p_queue IS NULL OR q.name = p_queue)
      AND (p_search IS NULL OR starts_with(p.name, p_search))
$$;

-- Namespaces and tasks with their queue and partition aggregates.
CREATE OR REPLACE FUNCTION rq_res_groupings(p_by_task bool)
RETURNS TABLE (name text, queues bigint, partitions bigint, messages bigint, pending bigint)
LANGUAGE sql STABLE AS $$
    WITH per_queue AS (
        SELECT CASE WHEN p_by_task THEN q.task ELSE q.namespace END AS name, q.id
        FROM rq_queues q
        WHERE CASE WHEN p_by_task THEN q.task ELSE q.namespace END IS NOT NULL
    )
    SELECT pq.name, count(DISTINCT pq.id),
           count(p.id),
           coalesce(sum(greatest(p.last_offset - f.first + 1, 0)), 0)::bigint,
           coalesce(sum(rq_pending(p.last_offset, p.log_start, f.first, c.done)), 0)::bigint
    FROM per_queue pq
    LEFT JOIN rq_partitions p ON p.queue_id = pq.id
    LEFT JOIN LATERAL (SELECT rq_first_offset(p.id, p.log_start, p.last_offset) AS first) f ON true
    LEFT JOIN LATERAL (SELECT min(c.committed) AS done FROM rq_consumers c WHERE c.partition_id = p.id) c
           ON true
    GROUP BY pq.name
    ORDER BY pq.name
$$;

-- The backlog of each partition of a queue, for the queue (worst cursor; p_group NULL) or for
-- one consumer group (its cursor or where its subscription will seed it). A group that has
-- neither a subscription nor a cursor on a partition owes nothing there (queue mode reads all).
CREATE OR REPLACE FUNCTION rq_res_depth_rows(p_queue_id bigint, p_group text)
RETURNS TABLE (partition_name text, pending bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.name,
           CASE
               WHEN p_group IS NULL THEN rq_pending(p.last_offset, p.log_start,
                                                    rq_first_offset(p.id, p.log_start, p.last_offset), w.done)
               WHEN c.committed IS NULL AND g.name IS NULL AND p_group <> '__QUEUE_MODE__' THEN 0
               ELSE greatest(p.last_offset - rq_effective_committed(p.id, p.log_start, p.last_offset,
                                                                    p.last_write_at, c.committed,
                                                                    g.subscription_from), 0)
           END
    FROM rq_partitions p
    LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
    LEFT JOIN rq_consumer_groups g ON g.queue_id = p.queue_id AND g.name = p_group
    LEFT JOIN LATERAL (SELECT min(c2.committed) AS done FROM rq_consumers c2
                       WHERE p_group IS NULL AND c2.partition_id = p.id) w ON true
    WHERE p.queue_id = p_queue_id
$$;

CREATE OR REPLACE FUNCTION rq_res_depth_totals(p_queue_id bigint, p_group text)
RETURNS TABLE (partitions bigint, pending bigint, partitions_pending bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*), coalesce(sum(d.pending), 0)::bigint, count(*) FILTER (WHERE d.pending > 0)
    FROM rq_res_depth_rows(p_queue_id, p_group) d
$$;

-- The largest backlogs first, one page.
CREATE OR REPLACE FUNCTION rq_res_depth_page(p_queue_id bigint, p_group text, p_limit int, p_offset int)
RETURNS TABLE (partition_name text, pending bigint)
LANGUAGE sql STABLE AS $$
    SELECT d.partition_name, d.pending FROM rq_res_depth_rows(p_queue_id, p_group) d
    ORDER BY d.pending DESC, d.partition_name
    LIMIT p_limit OFFSET p_offset
$$;

-- Whether a consumer group reads a queue: a durable subscription or any cursor there.
CREATE OR REPLACE FUNCTION rq_group_reads_queue(p_queue_id bigint, p_group text)
RETURNS bool LANGUAGE sql STABLE AS $$
    SELECT p_group = '__QUEUE_MODE__'
        OR EXISTS (SELECT 1 FROM rq_consumer_groups g WHERE g.queue_id = p_queue_id AND g.name = p_group)
        OR EXISTS (SELECT 1 FROM rq_partitions p
                   JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
                   WHERE p.queue_id = p_queue_id)
$$;
