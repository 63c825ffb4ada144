-- Pop: claim up to p_max_partitions partitions of one consumer group and deliver up to
-- p_batch messages in total, in offset order per partition. A claimed partition gets one
-- lease (shared by every partition of this call) or, with auto-ack, its cursor moves at once.
-- Rows come back one per segment slice; the broker joins the stored fragments into the answer.

-- Where a cursor that does not exist yet starts (the group's durable subscription decides).
CREATE OR REPLACE FUNCTION rq_seed_cursor(p_partition uuid, p_log_start bigint, p_from timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_from IS NULL THEN p_log_start - 1
        ELSE coalesce((SELECT s.end_offset FROM rq_segments s
                       WHERE s.partition_id = p_partition AND s.created_at < p_from
                       ORDER BY s.base_offset DESC LIMIT 1), p_log_start - 1)
    END
$$;

CREATE OR REPLACE FUNCTION rq_pop(
    p_queue           text,
    p_partition       text,
    p_namespace       text,
    p_task            text,
    p_group           text,
    p_batch           int,
    p_max_partitions  int,
    p_auto_ack        bool,
    p_lease_seconds   int,
    p_lease_id        uuid,
    p_sub_mode        text,
    p_sub_from        timestamptz
) RETURNS TABLE (queue_name text, partition_id uuid, partition_name text, created_at timestamptz,
                 attempt int, payloads bytea[])
LANGUAGE plpgsql AS $$
DECLARE
    v_queue_mode bool := p_group = '__QUEUE_MODE__';
    v_budget   int := p_batch;
    v_claimed  int := 0;
    v_cand     record;
    v_cur      rq_consumers%ROWTYPE;
    v_from     bigint;
    v_to       bigint;
    v_visible  bigint;
    v_attempt  int;
    v_lease    int;
    v_sub_from timestamptz;
BEGIN
    -- A named group registers its durable subscription on every queue it first reads.
    IF NOT v_queue_mode THEN
        INSERT INTO rq_consumer_groups (queue_id, name, subscription_mode, subscription_from)
        SELECT q.id, p_group, p_sub_mode,
               CASE WHEN p_sub_mode = 'new' THEN coalesce(p_sub_from, now()) ELSE p_sub_from END
        FROM rq_queues q
        WHERE (p_queue IS NULL OR q.name = p_queue)
          AND (p_namespace IS NULL OR q.namespace = p_namespace)
          AND (p_task IS NULL OR q.task = p_task)
          AND NOT EXISTS (SELECT 1 FROM rq_consumer_groups g WHERE g.queue_id = q.id AND g.name = p_group)
        ON CONFLICT DO NOTHING;
    END IF;

    FOR v_cand IN
        SELECT p.id, p.name, p.log_start, p.last_offset, q.name AS qname, q.id AS qid,
               q.lease_time, q.delayed_processing
        FROM rq_queues q
        JOIN rq_partitions p ON p.queue_id = q.id
        LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
        WHERE (p_queue IS NULL OR q.name = p_queue)
          AND (p_namespace IS NULL OR q.namespace = p_namespace)
          AND (p_task IS NULL OR q.task = p_task)
          AND (p_partition IS NULL OR p.name = p_partition)
          AND p.last_offset >= p.log_start
          AND (c.partition_id IS NULL
               OR (p.last_offset > c.committed
                   AND (c.span_end IS NULL OR c.lease_expires_at <= now())))
          AND (q.window_buffer = 0 OR p.last_write_at <= now() - make_interval(secs => q.window_buffer))
        ORDER BY random()
        LIMIT greatest(64, p_max_partitions * 4)
    LOOP
        EXIT WHEN v_claimed >= p_max_partitions OR v_budget <= 0;

        SELECT * INTO v_cur FROM rq_consumers c
        WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            IF EXISTS (SELECT 1 FROM rq_consumers c
                       WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group) THEN
                CONTINUE;  -- another poller holds it right now
            END IF;
            IF v_queue_mode THEN
                v_sub_from := NULL;
            ELSE
                SELECT g.subscription_from INTO v_sub_from FROM rq_consumer_groups g
                WHERE g.queue_id = v_cand.qid AND g.name = p_group;
            END IF;
            INSERT INTO rq_consumers AS c (partition_id, consumer_group, committed)
            VALUES (v_cand.id, p_group, rq_seed_cursor(v_cand.id, v_cand.log_start, v_sub_from))
            ON CONFLICT DO NOTHING
            RETURNING * INTO v_cur;
            CONTINUE WHEN NOT FOUND;
        END IF;
        CONTINUE WHEN v_cur.span_end IS NOT NULL AND v_cur.lease_expires_at > now();

        v_from := greatest(v_cur.committed + 1, v_cand.log_start);
        SELECT p.last_offset INTO v_to FROM rq_partitions p WHERE p.id = v_cand.id;
        v_to := least(v_to, v_from + v_budget - 1);
        IF v_cand.delayed_processing > 0 THEN
            SELECT max(s.end_offset) INTO v_visible FROM rq_segments s
            WHERE s.partition_id = v_cand.id AND s.base_offset <= v_to
              AND s.end_offset >= v_from
              AND s.created_at <= now() - make_interval(secs => v_cand.delayed_processing);
            v_to := least(v_to, coalesce(v_visible, v_from - 1));
        END IF;
        CONTINUE WHEN v_to < v_from;

        v_attempt := CASE WHEN v_from <= v_cur.last_delivered THEN v_cur.attempts + 1 ELSE 1 END;
        IF p_auto_ack THEN
            UPDATE rq_consumers c
            SET committed = v_to, span_start = NULL, span_end = NULL, lease_id = NULL,
                lease_expires_at = NULL, acked_count = 0, stop_at = NULL, retry_count = 0,
                retry_charged = false, attempts = v_attempt,
                last_delivered = greatest(v_cur.last_delivered, v_to)
            WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group;
        ELSE
            v_lease := CASE WHEN p_lease_seconds > 0 THEN p_lease_seconds
                            WHEN v_cand.lease_time > 0 THEN v_cand.lease_time ELSE 60 END;
            UPDATE rq_consumers c
            SET span_start = v_from, span_end = v_to, lease_id = p_lease_id,
                lease_expires_at = now() + make_interval(secs => v_lease),
                acked_count = 0, stop_at = NULL, retry_charged = false, attempts = v_attempt,
                last_delivered = greatest(v_cur.last_delivered, v_to)
            WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group;
        END IF;

        RETURN QUERY
        SELECT v_cand.qname, v_cand.id, v_cand.name, s.created_at, v_attempt,
               s.payloads[(greatest(s.base_offset, v_from) - s.base_offset + 1)
                          :(least(s.end_offset, v_to) - s.base_offset + 1)]
        FROM rq_segments s
        WHERE s.partition_id = v_cand.id
          AND s.base_offset >= coalesce((SELECT s2.base_offset FROM rq_segments s2
                                         WHERE s2.partition_id = v_cand.id AND s2.base_offset <= v_from
                                         ORDER BY s2.base_offset DESC LIMIT 1), v_from)
          AND s.base_offset <= v_to
        ORDER BY s.base_offset;

        v_budget := v_budget - (v_to - v_from + 1)::int;
        v_claimed := v_claimed + 1;
    END LOOP;
END;
$$;
