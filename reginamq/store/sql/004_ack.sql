-- Ack: many acknowledgements, possibly for many partitions and groups, in one call.
-- Cursor rows are locked in (partition, group) order, the same global order as pushes, so
-- concurrent acks never deadlock. Statuses arrive normalised: completed | retry | dlq | failed.
-- Rules: a later completed offset implicitly completes the silent ones below it; the cursor
-- stops below the lowest retry/failed offset; a failure charges the retry budget once per
-- delivery and, once it is spent, dead-letters (or drops) the failed message; acking the whole
-- leased span releases the lease. Rows come back cursor by cursor, not in item order; the
-- acknowledgements of a whole released span (nearly all of them) are answered by one row that
-- counts them (released), so an ack of a pop does not send back a row per message.
CREATE TYPE rq_ack_outcome AS (item int, success bool, error text, lease_released bool, dlq bool, noop bool);

-- One acknowledgement after resolution: its offset in the deliverable range (NULL when the
-- transactionId is not there) and whether its lease id (if it named one) is the live lease.
CREATE TYPE rq_ack_resolved AS (item int, txid text, lease_ok bool, off bigint, status text, err text);

CREATE OR REPLACE FUNCTION rq_ack(
    p_group      text[],
    p_partition  uuid[],
    p_txid       text[],
    p_lease      uuid[],
    p_status     text[],
    p_error      text[]
) RETURNS TABLE (item int, success bool, error text, lease_released bool, dlq bool, noop bool,
                 notice text, released int)
LANGUAGE plpgsql AS $$
DECLARE
    v_key        record;
    v_cur        rq_consumers%ROWTYPE;
    v_queue      record;
    v_live       bool;
    v_upper      bigint;
    v_acks       rq_ack_resolved[];
    v_offsets    jsonb;
    v_failed     bool;
    v_charged    bool;
    v_acked      bigint;
    v_spent      bool;
    v_retries    int;           -- the retries the messages dead-lettered now had
    v_stop       bigint;
    v_done_max   bigint;
    v_n          int;
    v_committed  bigint;
    v_released   bool;
    v_whole_pids uuid[];
    v_whole_grps text[];
    v_moves      rq_stats_move[];  -- what this call moved, for the statistics (012_stats.sql)
    v_notices    text[] := '{}';  -- partitions with work again, announced after the commit
    v_answered   bigint;  -- items the set-based step answered
BEGIN
    -- Every cursor of the call locked first, in the global order, so the set-based step and
    -- the loop below never take a cursor lock out of that order.
    PERFORM 1 FROM rq_consumers c
    JOIN (SELECT DISTINCT t.pid, t.grp FROM unnest(p_partition, p_group) AS t(pid, grp)) k
      ON c.partition_id = k.pid AND c.consumer_group = k.grp
    ORDER BY c.partition_id, c.consumer_group
    FOR UPDATE OF c;

    -- The common case in one statement for all its cursors: a cursor whose acknowledgements
    -- all complete, name its live lease (or none) and name the messages of the leased span in
    -- the order they were delivered (as a consumer acks a pop) commits the whole span and
    -- releases the lease. One array comparison per cursor decides it: a join of the items
    -- against the span's positions costs the same when planned well, and on tables without
    -- statistics yet it may be planned as a nested loop over both (quadratic in the ack's size).
    -- Every other cursor (another order, a partial ack, a failure) goes through the loop below,
    -- which also covers this case message by message.
    WITH items AS (
        SELECT t.pid, t.grp, t.txid, t.lease, t.status, t.ord
        FROM unnest(p_partition, p_group, p_txid, p_lease, p_status) WITH ORDINALITY
             AS t(pid, grp, txid, lease, status, ord)
    ), keys AS (
        SELECT i.pid, i.grp, count(*) AS n, array_agg(i.txid ORDER BY i.ord) AS txids,
               array_agg(DISTINCT i.lease) FILTER (WHERE i.lease IS NOT NULL) AS leases
        FROM items i
        GROUP BY i.pid, i.grp
        HAVING bool_and(i.status = 'completed')
    ), cursors AS MATERIALIZED (
        -- each cursor reached by its key alone: with the lease conditions beside it the planner
        -- may prefer the lease index, which steps over every live lease of the group
        SELECT k.pid, k.grp, k.n, k.txids, k.leases, c.span_start, c.span_end, c.lease_id, c.lease_expires_at,
               c.stop_at, c.acked_count
        FROM keys k
        JOIN rq_consumers c ON c.partition_id = k.pid AND c.consumer_group = k.grp
    ), whole AS (
        SELECT c.pid, c.grp, c.span_end, c.n
        FROM cursors c
        WHERE c.span_end IS NOT NULL AND c.lease_expires_at > now() AND c.stop_at IS NULL
          AND c.acked_count = 0 AND c.span_end - c.span_start + 1 = c.n
          AND (c.leases IS NULL OR c.leases = ARRAY[c.lease_id])
          AND c.txids = (
              -- the span's transactionIds in offset order, from the segment it starts in on
              SELECT array_agg(m.txid ORDER BY g.base_offset, m.pos)
              FROM rq_segments g
              CROSS JOIN LATERAL unnest(g.txids) WITH ORDINALITY AS m(txid, pos)
              WHERE g.partition_id = c.pid
                AND g.base_offset BETWEEN coalesce((SELECT f.base_offset FROM rq_segments f
                                                    WHERE f.partition_id = c.pid AND f.base_offset <= c.span_start
                                                    ORDER BY f.base_offset DESC LIMIT 1), c.span_start)
                                      AND c.span_end
                AND g.base_offset + m.pos - 1 BETWEEN c.span_start AND c.span_end)
    ), released AS (
        UPDATE rq_consumers c
        SET committed = w.span_end, span_start = NULL, span_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, acked_count = 0, stop_at = NULL, retry_count = 0, retry_charged = false
        FROM whole w, rq_partitions p
        WHERE c.partition_id = w.pid AND c.consumer_group = w.grp AND p.id = w.pid
        RETURNING c.partition_id, c.consumer_group, p.queue_id, w.n
    )
    -- the span was consumed: its messages acked, the read position past them (the span starts
    -- right after the committed offset, or at the log start past evicted messages)
    SELECT array_agg(r.partition_id), array_agg(r.consumer_group),
           coalesce(array_agg(ROW(r.queue_id, r.consumer_group, 0, r.n, 0, 0)::rq_stats_move), '{}'),
           coalesce(sum(r.n), 0)
    INTO v_whole_pids, v_whole_grps, v_moves, v_answered
    FROM released r;

    -- more data behind a released span: wake parked pops, hint the partition (a notice the
    -- broker sends once this call has committed, as rq_push's, 002_push.sql)
    v_notices := ARRAY(
        SELECT q.name || E'\n' || p.id::text
        FROM unnest(v_whole_pids, v_whole_grps) AS w(pid, grp)
        JOIN rq_consumers c ON c.partition_id = w.pid AND c.consumer_group = w.grp
        JOIN rq_partitions p ON p.id = w.pid
        JOIN rq_queues q ON q.id = p.queue_id
        WHERE p.last_offset > c.committed);

    -- every item of those spans: completed, its lease released (the broker answers each)
    IF v_answered > 0 THEN
        RETURN QUERY SELECT NULL::int, true, NULL::text, true, false, false, NULL::text, v_answered::int;
    END IF;

    -- The acknowledgements of each (partition, group) gathered once, so every step below reads
    -- only its own cursor's items however many cursors one call spans. Skipped when the step
    -- above answered every item (nearly every call): gathering nothing still read them all.
    FOR v_key IN
        SELECT t.pid, t.grp, array_agg((t.ord - 1)::int ORDER BY t.ord) AS items,
               array_agg(t.txid ORDER BY t.ord) AS txids, array_agg(t.lease ORDER BY t.ord) AS leases,
               array_agg(t.status ORDER BY t.ord) AS statuses, array_agg(t.err ORDER BY t.ord) AS errs
        FROM unnest(p_partition, p_group, p_txid, p_lease, p_status, p_error)
             WITH ORDINALITY AS t(pid, grp, txid, lease, status, err, ord)
        WHERE v_answered < cardinality(p_txid)
          AND NOT EXISTS (SELECT 1 FROM unnest(v_whole_pids, v_whole_grps) AS w(pid, grp)
                          WHERE w.pid = t.pid AND w.grp = t.grp)
        GROUP BY t.pid, t.grp
        ORDER BY t.pid, t.grp
    LOOP
        SELECT * INTO v_cur FROM rq_consumers c  -- locked at the top
        WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp;
        IF NOT FOUND THEN
            RETURN QUERY
            SELECT i, false, 'no delivery to acknowledge for this partition and consumer group', false, false, false,
                   NULL::text, NULL::int
            FROM unnest(v_key.items) AS i;
            CONTINUE;
        END IF;
        SELECT q.id, q.name, q.retry_limit, q.dlq_enabled, coalesce(q.retry_delay_ms, 0) AS retry_delay_ms,
               p.last_offset INTO v_queue
        FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE p.id = v_key.pid;

        v_live := v_cur.span_end IS NOT NULL AND v_cur.lease_expires_at > now();
        IF v_live THEN
            v_upper := v_cur.span_end;
        ELSE
            SELECT p.last_offset INTO v_upper FROM rq_partitions p WHERE p.id = v_key.pid;
        END IF;

        -- Resolve every transactionId of this cursor at once: one pass over the deliverable
        -- range (at most one pop's worth of messages while a lease is live) into a jsonb map
        -- txid -> lowest offset (jsonb keeps the last duplicate key, hence the descending order).
        SELECT jsonb_object_agg(m.txid, s.base_offset + m.pos - 1 ORDER BY s.base_offset + m.pos - 1 DESC)
        INTO v_offsets
        FROM rq_segments s
        CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS m(txid, pos)
        WHERE s.partition_id = v_key.pid
          AND s.base_offset >= coalesce((SELECT s2.base_offset FROM rq_segments s2
                                         WHERE s2.partition_id = v_key.pid
                                           AND s2.base_offset <= v_cur.committed + 1
                                         ORDER BY s2.base_offset DESC LIMIT 1), 0)
          AND s.base_offset <= v_upper
          AND s.base_offset + m.pos - 1 > v_cur.committed
          AND s.base_offset + m.pos - 1 <= v_upper;

        SELECT array_agg(ROW(a.item, a.txid, a.lease_ok,
                             CASE WHEN a.lease_ok THEN (v_offsets ->> a.txid)::bigint END,
                             a.status, a.err)::rq_ack_resolved ORDER BY a.item)
        INTO v_acks
        FROM (SELECT t.item, t.txid, t.status, t.err,
                     t.lease IS NULL OR (v_live AND t.lease = v_cur.lease_id) AS lease_ok
              FROM unnest(v_key.items, v_key.txids, v_key.leases, v_key.statuses, v_key.errs)
                   AS t(item, txid, lease, status, err)) a;

        -- Refused (foreign or stale lease) and unresolved acknowledgements answer now; an
        -- unresolved one whose message is already below the cursor is a no-op success.
        RETURN QUERY
        SELECT (CASE
                WHEN NOT a.lease_ok
                    THEN ROW(a.item, false, 'invalid or expired lease', false, false, false)::rq_ack_outcome
                WHEN EXISTS (SELECT 1 FROM rq_segments s WHERE s.partition_id = v_key.pid
                               AND s.base_offset <= v_cur.committed AND a.txid = ANY (s.txids))
                    THEN ROW(a.item, true, NULL, false, false, true)::rq_ack_outcome
                ELSE ROW(a.item, false, 'message not found in this partition''s deliverable range',
                         false, false, false)::rq_ack_outcome
            END).*, NULL::text, NULL::int
        FROM unnest(v_acks) a WHERE a.off IS NULL;

        SELECT count(*), bool_or(a.status = 'failed')
        INTO v_n, v_failed FROM unnest(v_acks) a WHERE a.off IS NOT NULL;
        CONTINUE WHEN v_n = 0;

        -- One charge of the retry budget per delivery; once spent, failures are terminal.
        v_spent := false;
        v_retries := v_cur.retry_count;
        v_charged := v_failed AND NOT v_cur.retry_charged;
        IF v_charged THEN
            IF v_cur.retry_count >= v_queue.retry_limit THEN
                v_spent := true;
                v_cur.retry_count := 0;
            ELSE
                v_cur.retry_count := v_cur.retry_count + 1;
                v_cur.retry_charged := true;
            END IF;
        END IF;

        IF v_queue.dlq_enabled THEN
            INSERT INTO rq_dlq (queue_id, partition_id, consumer_group, message_offset, transaction_id,
                                payload, message_created_at, error_message, retry_count)
            SELECT v_queue.id, v_key.pid, v_key.grp, a.off, a.txid, s.payloads[a.off - s.base_offset + 1],
                   s.created_at, a.err, v_retries
            FROM unnest(v_acks) a
            JOIN rq_segments s ON s.partition_id = v_key.pid AND s.base_offset <= a.off AND s.end_offset >= a.off
            WHERE a.off IS NOT NULL AND (a.status = 'dlq' OR (a.status = 'failed' AND v_spent));
        END IF;

        SELECT least(v_cur.stop_at,
                     min(a.off) FILTER (WHERE a.status = 'retry' OR (a.status = 'failed' AND NOT v_spent))),
               max(a.off) FILTER (WHERE a.status IN ('completed', 'dlq') OR (a.status = 'failed' AND v_spent))
        INTO v_stop, v_done_max
        FROM unnest(v_acks) a WHERE a.off IS NOT NULL;

        v_committed := greatest(v_cur.committed,
                                CASE WHEN v_stop IS NULL THEN v_done_max
                                     ELSE least(v_done_max, v_stop - 1) END);
        v_cur.acked_count := v_cur.acked_count + v_n;
        v_released := v_live AND (
            (v_stop IS NULL AND v_committed >= v_cur.span_end)
            OR v_cur.acked_count >= v_cur.span_end - v_cur.span_start + 1);

        IF v_released THEN
            -- A span released below its end (a retry or a failure) is left as a lease that
            -- expires after the queue's retryDelay: the next pop of the group finds it through
            -- the expiring-lease index once the delay is over, however long ago the partition
            -- was written.
            UPDATE rq_consumers c
            SET committed = v_committed,
                span_start = CASE WHEN v_stop IS NULL THEN NULL ELSE c.span_start END,
                span_end = CASE WHEN v_stop IS NULL THEN NULL ELSE c.span_end END,
                lease_id = NULL,
                lease_expires_at = CASE WHEN v_stop IS NULL THEN NULL
                                        ELSE now() + v_queue.retry_delay_ms * interval '1 millisecond' END,
                acked_count = 0, stop_at = NULL,
                retry_count = CASE WHEN v_stop IS NULL THEN 0 ELSE v_cur.retry_count END,
                retry_charged = false
            WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp;
            IF (v_stop IS NULL AND v_committed < greatest(v_upper, v_queue.last_offset))
               OR (v_stop IS NOT NULL AND v_queue.retry_delay_ms = 0) THEN
                -- something is deliverable again at once: wake parked pops, hint the partition
                v_notices := v_notices || (v_queue.name || E'\n' || v_key.pid::text);
            END IF;
        ELSE
            UPDATE rq_consumers c
            SET committed = v_committed, acked_count = v_cur.acked_count, stop_at = v_stop,
                retry_count = v_cur.retry_count, retry_charged = v_cur.retry_charged
            WHERE c.partition_id = v_key.pid AND c.consumer_group = v_key.grp;
        END IF;
        -- acked: how far the cursor moved (a completion below commits the silent ones too), from
        -- the span's start when evicted messages lie between; failed: a charge of the budget
        v_acked := greatest(v_committed - greatest(v_cur.committed, v_cur.span_start - 1), 0);
        IF v_acked > 0 OR v_charged THEN
            v_moves := v_moves || ROW(v_queue.id, v_key.grp, 0, v_acked, CASE WHEN v_charged THEN 1 ELSE 0 END,
                                      0)::rq_stats_move;
        END IF;
        RETURN QUERY
        SELECT a.item, true, NULL::text, v_released,
               v_queue.dlq_enabled AND (a.status = 'dlq' OR (a.status = 'failed' AND v_spent)), false, NULL::text,
               NULL::int
        FROM unnest(v_acks) a WHERE a.off IS NOT NULL;
    END LOOP;
    IF cardinality(v_moves) > 0 THEN
        PERFORM rq_stats_note(v_moves);
    END IF;
    RETURN QUERY SELECT NULL::int, NULL::bool, NULL::text, NULL::bool, NULL::bool, NULL::bool, n, NULL::int
                 FROM unnest(v_notices) AS n;
END;
$$;

-- A lease handed back unseen (the broker's pop was cancelled while its statement ran): it ends
-- now, so the next pop takes its messages as after any expiry (one more delivery attempt, no
-- charge to the retry budget). Answers how many partitions it covered.
CREATE OR REPLACE FUNCTION rq_expire_lease(p_lease uuid)
RETURNS int
LANGUAGE sql AS $$
    WITH r AS (
        UPDATE rq_consumers c
        SET lease_expires_at = now()
        WHERE c.lease_id = p_lease AND c.span_end IS NOT NULL AND c.lease_expires_at > now()
        RETURNING 1
    )
    SELECT count(*)::int FROM r
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
