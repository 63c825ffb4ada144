-- Consumer groups as operators see them: where each group stands on each partition of each
-- queue it reads, its lag, and the operations that move or forget its cursors.
--
-- A group reads a queue when it has a durable subscription there (rq_consumer_groups) or, for
-- a group whose subscription row is gone, any cursor there. A subscribed group stands on every
-- partition of the queue: on its cursor, or where its subscription will seed one
-- (rq_effective_committed). Queue mode (__QUEUE_MODE__) has no subscription row: it is listed
-- only when asked for by name, and then reads every partition of every queue from the start.
-- A subscribed group on a queue without partitions yet is one row with NULL partition columns.

-- The queues a group reads, one row each, with the subscription that places its cursors.
CREATE OR REPLACE FUNCTION rq_grp_pairs(p_group text, p_queue text)
RETURNS TABLE (queue_id bigint, name text, subscription_mode text, subscription_from timestamptz,
               created_at timestamptz, subscribed bool, conflation bool)
LANGUAGE sql STABLE AS $$
    SELECT g.queue_id, g.name, g.subscription_mode, g.subscription_from, g.created_at, true, g.conflation
    FROM rq_consumer_groups g JOIN rq_queues q ON q.id = g.queue_id
    WHERE (p_group IS NULL OR g.name = p_group) AND (p_queue IS NULL OR q.name = p_queue)
    UNION ALL
    SELECT q.id, p_group, 'all', NULL::timestamptz, q.created_at, true, false
    FROM rq_queues q
    WHERE p_group = '__QUEUE_MODE__' AND (p_queue IS NULL OR q.name = p_queue)
    UNION ALL
    SELECT DISTINCT p.queue_id, c.consumer_group, NULL::text, NULL::timestamptz, NULL::timestamptz, false, false
    FROM rq_consumers c
    JOIN rq_partitions p ON p.id = c.partition_id
    JOIN rq_queues q ON q.id = p.queue_id
    WHERE c.consumer_group <> '__QUEUE_MODE__'
      AND (p_group IS NULL OR c.consumer_group = p_group)
      AND (p_queue IS NULL OR q.name = p_queue)
      AND NOT EXISTS (SELECT 1 FROM rq_consumer_groups g
                      WHERE g.queue_id = p.queue_id AND g.name = c.consumer_group)
$$;

CREATE OR REPLACE FUNCTION rq_grp_cursors(p_group text, p_queue text)
RETURNS TABLE (queue_id bigint, queue_name text, group_name text, subscription_mode text,
               subscription_from timestamptz, subscribed_at timestamptz, partition_id uuid,
               partition_name text, last_offset bigint, log_start bigint, committed bigint,
               effective bigint, lease_id uuid, lease_expires_at timestamptz,
               span_start bigint, span_end bigint, conflation bool)
LANGUAGE sql STABLE AS $$
    SELECT pr.queue_id, q.name, pr.name, pr.subscription_mode, pr.subscription_from, pr.created_at,
           p.id, p.name, p.last_offset, rq_first_offset(p.id, p.log_start, p.last_offset), c.committed,
           rq_effective_committed(p.id, p.log_start, p.last_offset, p.last_write_at, c.committed,
                                  pr.subscription_from),
           c.lease_id, c.lease_expires_at, c.span_start, c.span_end, pr.conflation
    FROM rq_grp_pairs(p_group, p_queue) pr
    JOIN rq_queues q ON q.id = pr.queue_id
    LEFT JOIN rq_partitions p ON p.queue_id = pr.queue_id
    LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = pr.name
    WHERE pr.subscribed OR c.partition_id IS NOT NULL
$$;

-- One row per (group, queue): partitions, cursors, live leases, lag in messages and the push
-- time of the oldest message the group has not consumed (age = maxTimeLag).
CREATE OR REPLACE FUNCTION rq_grp_summaries(p_group text, p_queue text)
RETURNS TABLE (group_name text, queue_name text, subscription_mode text, subscription_from timestamptz,
               subscribed_at timestamptz, partitions bigint, cursors bigint, leased bigint,
               partitions_with_lag bigint, total_lag bigint, oldest_pending_at timestamptz, conflation bool)
LANGUAGE sql STABLE AS $$
    SELECT x.group_name, x.queue_name, max(x.subscription_mode), max(x.subscription_from),
           max(x.subscribed_at), count(x.partition_id), count(x.committed),
           count(*) FILTER (WHERE x.span_end IS NOT NULL AND x.lease_expires_at > now()),
           count(*) FILTER (WHERE x.last_offset > x.effective),
           coalesce(sum(greatest(x.last_offset - x.effective, 0)), 0)::bigint,
           min(f.created_at), bool_or(x.conflation)
    FROM rq_grp_cursors(p_group, p_queue) x
    -- the segment holding the group's first unconsumed message (an index probe, lagging rows only)
    LEFT JOIN LATERAL (
        SELECT s.created_at FROM rq_segments s
        WHERE x.last_offset > x.effective AND s.partition_id = x.partition_id
          AND s.base_offset <= x.effective + 1
        ORDER BY s.base_offset DESC LIMIT 1
    ) f ON true
    GROUP BY x.group_name, x.queue_name
    ORDER BY x.group_name, x.queue_name
$$;

-- A page of one group's partitions in each queue it reads (optionally one queue): p_limit
-- partitions by name from p_offset on, per queue. The page is taken on the (queue_id, name)
-- index before any position is worked out, so a queue of a million partitions costs a page.
CREATE OR REPLACE FUNCTION rq_grp_partition_pages(p_group text, p_queue text, p_limit int, p_offset int)
RETURNS TABLE (queue_name text, partition_name text, partition_id uuid, last_offset bigint,
               log_start bigint, committed bigint, effective bigint, lag bigint,
               oldest_pending_at timestamptz, lease_id uuid, lease_expires_at timestamptz,
               span_start bigint, span_end bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.name, p.name, p.id, p.last_offset, rq_first_offset(p.id, p.log_start, p.last_offset),
           c.committed, e.effective, greatest(p.last_offset - e.effective, 0),
           CASE WHEN p.last_offset > e.effective THEN rq_message_created_at(p.id, e.effective + 1) END,
           c.lease_id, c.lease_expires_at, c.span_start, c.span_end
    FROM rq_grp_pairs(p_group, p_queue) pr
    JOIN rq_queues q ON q.id = pr.queue_id
    CROSS JOIN LATERAL (
        SELECT p.* FROM rq_partitions p
        WHERE p.queue_id = pr.queue_id
          AND (pr.subscribed OR EXISTS (SELECT 1 FROM rq_consumers c
                                        WHERE c.partition_id = p.id AND c.consumer_group = pr.name))
        ORDER BY p.name
        LIMIT p_limit OFFSET p_offset
    ) p
    LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = pr.name
    CROSS JOIN LATERAL (
        SELECT rq_effective_committed(p.id, p.log_start, p.last_offset, p.last_write_at, c.committed,
                                      pr.subscription_from) AS effective
    ) e
    ORDER BY q.name, p.name
$$;

-- Move every cursor of a group on a queue: to the end of each partition (p_to_end), or to just
-- before the first message pushed at or after p_at. Partitions the group has not read yet get
-- their cursor now, so the move holds for them too. Leases and retry state are cleared.
-- Rows are written in partition order, the order acks lock cursors in.
-- Answers NULL counts when the queue does not exist, -1 when the group does not read it.
CREATE OR REPLACE FUNCTION rq_grp_seek(p_group text, p_queue text, p_to_end bool, p_at timestamptz)
RETURNS TABLE (updated int, created int)
LANGUAGE plpgsql AS $$
DECLARE
    v_queue_id bigint;
BEGIN
    SELECT q.id INTO v_queue_id FROM rq_queues q WHERE q.name = p_queue;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::int, NULL::int;
        RETURN;
    END IF;
    IF NOT rq_group_reads_queue(v_queue_id, p_group) THEN
        RETURN QUERY SELECT -1, -1;
        RETURN;
    END IF;
    RETURN QUERY
    WITH moved AS (
        INSERT INTO rq_consumers AS c (partition_id, consumer_group, committed, last_delivered)
        SELECT p.id, p_group, t.pos, t.pos
        FROM rq_partitions p
        CROSS JOIN LATERAL (
            SELECT CASE WHEN p_to_end THEN p.last_offset
                        ELSE rq_seed_cursor(p.id, p.log_start, p.last_offset, p_at) END AS pos
        ) t
        WHERE p.queue_id = v_queue_id
        ORDER BY p.id
        ON CONFLICT (partition_id, consumer_group) DO UPDATE
        SET committed = EXCLUDED.committed, span_start = NULL, span_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, acked_count = 0, stop_at = NULL, retry_count = 0,
            retry_charged = false, attempts = 0, last_delivered = EXCLUDED.committed
        RETURNING (xmax = 0) AS inserted
    )
    SELECT (count(*) FILTER (WHERE NOT m.inserted))::int, (count(*) FILTER (WHERE m.inserted))::int
    FROM moved m;
    -- wake parked pops: a seek backwards makes messages deliverable again
    PERFORM pg_notify('rq_push', p_queue);
END;
$$;

-- Forget a group's cursors on one queue (p_queue) or on every queue; with p_metadata also
-- its durable subscriptions, so a later pop subscribes afresh. Answers NULL counts when the
-- named queue does not exist.
CREATE OR REPLACE FUNCTION rq_grp_delete(p_group text, p_queue text, p_metadata bool)
RETURNS TABLE (cursors int, subscriptions int)
LANGUAGE plpgsql AS $$
DECLARE
    v_queue_id bigint;
    v_cursors int := 0;
    v_subs int := 0;
BEGIN
    IF p_queue IS NOT NULL THEN
        SELECT q.id INTO v_queue_id FROM rq_queues q WHERE q.name = p_queue;
        IF NOT FOUND THEN
            RETURN QUERY SELECT NULL::int, NULL::int;
            RETURN;
        END IF;
        DELETE FROM rq_consumers c USING rq_partitions p
        WHERE p.queue_id = v_queue_id AND c.partition_id = p.id AND c.consumer_group = p_group;
        GET DIAGNOSTICS v_cursors = ROW_COUNT;
        IF p_metadata THEN
            DELETE FROM rq_consumer_groups g WHERE g.queue_id = v_queue_id AND g.name = p_group;
            GET DIAGNOSTICS v_subs = ROW_COUNT;
        END IF;
        IF v_cursors > 0 OR v_subs > 0 THEN
            -- the group may read it all again, under a policy its next pop registers afresh
            PERFORM pg_notify('rq_push', p_queue);
        END IF;
    ELSE
        DELETE FROM rq_consumers c WHERE c.consumer_group = p_group;
        GET DIAGNOSTICS v_cursors = ROW_COUNT;
        PERFORM pg_notify('rq_push', q.name) FROM rq_queues q
        WHERE q.id IN (SELECT g.queue_id FROM rq_consumer_groups g WHERE g.name = p_group);
        IF p_metadata THEN
            DELETE FROM rq_consumer_groups g WHERE g.name = p_group;
            GET DIAGNOSTICS v_subs = ROW_COUNT;
        END IF;
    END IF;
    RETURN QUERY SELECT v_cursors, v_subs;
END;
$$;

-- Change a group's durable subscription: on one queue (created there when missing; the queue
-- must exist) or on every queue it is subscribed to. Only cursors created later are affected.
CREATE OR REPLACE FUNCTION rq_grp_subscribe(p_group text, p_queue text, p_mode text, p_from timestamptz)
RETURNS TABLE (queue_name text, subscription_mode text, subscription_from timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_queue IS NOT NULL THEN
        RETURN QUERY
        WITH up AS (
            INSERT INTO rq_consumer_groups AS g (queue_id, name, subscription_mode, subscription_from)
            SELECT q.id, p_group, p_mode, p_from FROM rq_queues q WHERE q.name = p_queue
            ON CONFLICT (queue_id, name) DO UPDATE
            SET subscription_mode = EXCLUDED.subscription_mode, subscription_from = EXCLUDED.subscription_from
            RETURNING g.queue_id, g.subscription_mode, g.subscription_from
        )
        SELECT p_queue, up.subscription_mode, up.subscription_from FROM up;
    ELSE
        RETURN QUERY
        WITH up AS (
            UPDATE rq_consumer_groups g SET subscription_mode = p_mode, subscription_from = p_from
            WHERE g.name = p_group
            RETURNING g.queue_id, g.subscription_mode, g.subscription_from
        )
        SELECT q.name, up.subscription_mode, up.subscription_from
        FROM up JOIN rq_queues q ON q.id = up.queue_id ORDER BY q.name;
    END IF;
END;
$$;
