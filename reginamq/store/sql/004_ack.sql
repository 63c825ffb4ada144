-- Ack: many acknowledgements, possibly for many partitions and groups, in one call.
-- Cursor rows are locked in (partition, group) order, the same global order as pushes, so
-- concurrent acks never deadlock. Statuses arrive normalised: completed | retry | dlq | failed.
-- Rules: a later completed offset implicitly completes the silent ones below it; the cursor
-- stops below the lowest retry/failed offset; a failure charges the retry budget once per
-- delivery and, once it is spent, dead-letters (or drops) the failed message; acking the whole
-- leased span releases the lease.
DO $$ BEGIN
    CREATE TYPE rq_ack_result AS (item int, success bool, error text, dlq bool, noop bool);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE OR REPLACE FUNCTION rq_ack(
    p_group      text[],
    p_partition  uuid[],
    p_txid       text[],
    p_lease      uuid[],
    p_status     text[],
    p_error      text[]
) RETURNS TABLE (item int, success bool, error text, lease_released bool, dlq bool, noop bool)
LANGUAGE plpgsql AS $$
DECLARE
    v_key       record;
    v_cur       rq_consumers%ROWTYPE;
    v_queue     record;
    v_live      bool;
    v_upper     bigint;
    v_ack       record;
    v_offset    bigint;
    v_items     int[];
    v_offsets   bigint[];
    v_statuses  text[];
    v_errors    text[];
    v_spent     bool;
    v_stop      bigint;
    v_done_max  bigint;
    v_committed bigint;
    v_released  bool;
    v_n         int;
    i           int;
    v_results   rq_ack_result[] := '{}';
    v_released_items int[] := '{}';
BEGIN
    FOR v_key IN
        SELECT DISTINCT t.pid, t.grp
        FROM unnest(p_partition, p_group) AS t(pid, grp)
        ORDER BY t.pid, t.grp
    LOOP
        SELECT * INTO v_cur FROM rq_consumers c
        WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp FOR UPDATE;
        IF NOT FOUND THEN
            SELECT v_results || array_agg(ROW((t.ord - 1)::int, false,
                       'no delivery to acknowledge for this partition and consumer group', false, false
                   )::rq_ack_result)
            INTO v_results
            FROM unnest(p_partition, p_group) WITH ORDINALITY AS t(pid, grp, ord)
            WHERE t.pid = v_key.pid AND t.grp = v_key.grp;
            CONTINUE;
        END IF;
        SELECT q.id, q.retry_limit, q.dlq_enabled INTO v_queue
        FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE p.id = v_key.pid;

        v_live := v_cur.span_end IS NOT NULL AND v_cur.lease_expires_at > now();
        IF v_live THEN
            v_upper := v_cur.span_end;
        ELSE
            SELECT p.last_offset INTO v_upper FROM rq_partitions p WHERE p.id = v_key.pid;
        END IF;
        v_items := '{}'; v_offsets := '{}'; v_statuses := '{}'; v_errors := '{}';

        FOR v_ack IN
            SELECT (t.ord - 1)::int AS item, t.txid, t.lease, t.status, t.err
            FROM unnest(p_partition, p_group, p_txid, p_lease, p_status, p_error)
                 WITH ORDINALITY AS t(pid, grp, txid, lease, status, err, ord)
            WHERE t.pid = v_key.pid AND t.grp = v_key.grp
            ORDER BY t.ord
        LOOP
            IF v_ack.lease IS NOT NULL AND NOT (v_live AND v_cur.lease_id = v_ack.lease) THEN
                v_results := v_results || ROW(v_ack.item, false, 'invalid or expired lease', false, false)::rq_ack_result;
                CONTINUE;
            END IF;
            SELECT s.base_offset
                   + array_position(s.txids, v_ack.txid,
                                    greatest(1, v_cur.committed + 2 - s.base_offset)::int) - 1
            INTO v_offset
            FROM rq_segments s
            WHERE s.partition_id = v_key.pid
              AND s.base_offset >= coalesce((SELECT s2.base_offset FROM rq_segments s2
                                             WHERE s2.partition_id = v_key.pid
                                               AND s2.base_offset <= v_cur.committed + 1
                                             ORDER BY s2.base_offset DESC LIMIT 1), 0)
              AND s.base_offset <= v_upper
              AND array_position(s.txids, v_ack.txid,
                                 greatest(1, v_cur.committed + 2 - s.base_offset)::int) IS NOT NULL
            ORDER BY s.base_offset LIMIT 1;
            IF v_offset IS NULL OR v_offset > v_upper THEN
                IF EXISTS (SELECT 1 FROM rq_segments s WHERE s.partition_id = v_key.pid
                           AND s.base_offset <= v_cur.committed AND v_ack.txid = ANY (s.txids)) THEN
                    v_results := v_results || ROW(v_ack.item, true, NULL, false, true)::rq_ack_result;
                ELSE
                    v_results := v_results || ROW(v_ack.item, false, 'message not found in this partition''s deliverable range', false, false)::rq_ack_result;
                END IF;
                CONTINUE;
            END IF;
            v_items := v_items || v_ack.item;
            v_offsets := v_offsets || v_offset;
            v_statuses := v_statuses || v_ack.status;
            v_errors := v_errors || v_ack.err;
        END LOOP;
        v_n := coalesce(cardinality(v_items), 0);
        CONTINUE WHEN v_n = 0;

        -- One charge of the retry budget per delivery; once spent, failures are terminal.
        v_spent := false;
        IF 'failed' = ANY (v_statuses) AND NOT v_cur.retry_charged THEN
            IF v_cur.retry_count >= v_queue.retry_limit THEN
                v_spent := true;
                v_cur.retry_count := 0;
            ELSE
                v_cur.retry_count := v_cur.retry_count + 1;
                v_cur.retry_charged := true;
            END IF;
        END IF;

        v_stop := v_cur.stop_at;
        v_done_max := NULL;
        FOR i IN 1 .. v_n LOOP
            IF v_statuses[i] = 'dlq' OR (v_statuses[i] = 'failed' AND v_spent) THEN
                IF v_queue.dlq_enabled THEN
                    INSERT INTO rq_dlq (queue_id, partition_id, consumer_group, message_offset,
                                        transaction_id, payload, message_created_at,
                                        error_message, retry_count)
                    SELECT v_queue.id, v_key.pid, v_key.grp, v_offsets[i], s.txids[v_offsets[i] - s.base_offset + 1],
                           s.payloads[v_offsets[i] - s.base_offset + 1], s.created_at, v_errors[i],
                           v_cur.retry_count
                    FROM rq_segments s
                    WHERE s.partition_id = v_key.pid AND s.base_offset <= v_offsets[i]
                      AND s.end_offset >= v_offsets[i];
                END IF;
                v_results := v_results || ROW(v_items[i], true, NULL, v_queue.dlq_enabled, false)::rq_ack_result;
                v_done_max := greatest(v_done_max, v_offsets[i]);
            ELSIF v_statuses[i] IN ('retry', 'failed') THEN
                v_stop := least(coalesce(v_stop, v_offsets[i]), v_offsets[i]);
                v_results := v_results || ROW(v_items[i], true, NULL, false, false)::rq_ack_result;
            ELSE
                v_results := v_results || ROW(v_items[i], true, NULL, false, false)::rq_ack_result;
                v_done_max := greatest(v_done_max, v_offsets[i]);
            END IF;
        END LOOP;

        v_committed := greatest(v_cur.committed,
                                CASE WHEN v_stop IS NULL THEN v_done_max
                                     ELSE least(v_done_max, v_stop - 1) END);
        v_cur.acked_count := v_cur.acked_count + v_n;
        v_released := v_live AND (
            (v_stop IS NULL AND v_committed >= v_cur.span_end)
            OR v_cur.acked_count >= v_cur.span_end - v_cur.span_start + 1);

        IF v_released THEN
            UPDATE rq_consumers c
            SET committed = v_committed, span_start = NULL, span_end = NULL, lease_id = NULL,
                lease_expires_at = NULL, acked_count = 0, stop_at = NULL,
                retry_count = CASE WHEN v_stop IS NULL THEN 0 ELSE v_cur.retry_count END,
                retry_charged = false
            WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp;
            v_released_items := v_released_items || v_items;
            PERFORM pg_notify('rq_push', q.name) FROM rq_queues q WHERE q.id = v_queue.id;
        ELSE
            UPDATE rq_consumers c
            SET committed = v_committed, acked_count = v_cur.acked_count, stop_at = v_stop,
                retry_count = v_cur.retry_count, retry_charged = v_cur.retry_charged
            WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp;
        END IF;
    END LOOP;

    RETURN QUERY
    SELECT r.item, r.success, r.error, r.item = ANY (v_released_items), r.dlq, r.noop
    FROM unnest(v_results) AS r ORDER BY r.item;
END;
$$;

-- Extend a live lease (every partition it covers). Renewal never shortens a lease.
CREATE OR REPLACE FUNCTION rq_extend_lease(p_lease uuid, p_seconds int)
RETURNS TABLE (renewed int, expires_at timestamptz)
LANGUAGE sql AS $$
    WITH r AS (
        UPDATE rq_consumers c
        SET lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds))
        WHERE c.lease_id = p_lease AND c.span_end IS NOT NULL AND c.lease_expires_at > now()
        RETURNING c.lease_expires_at
    )
    SELECT count(*)::int, max(r.lease_expires_at) FROM r
$$;
