-- Pop: claim up to p_max_partitions partitions of one consumer group and deliver up to
-- p_batch messages in total, in offset order per partition. A claimed partition gets one
-- lease (shared by every partition of this call) or, with auto-ack, its cursor moves at once.
-- Rows come back one per segment slice; the broker joins the stored fragments into the answer.

-- The first offset a partition still stores. log_start moves when retention deletes messages
-- some reader had not consumed (eviction), and every cursor is kept at or past it; a prefix that
-- every reader had consumed is deleted without moving it (rq_retention_delete: where each
-- deletion empties a partition of its own, writing the partition row for each would be most of
-- retention's cost). So the stored segments may begin after log_start. No cursor is behind
-- them (each had consumed them); a reader without a cursor, and a count of what a partition
-- holds, find the first segment here: one index probe, only when log_start says the partition
-- holds something.
CREATE OR REPLACE FUNCTION rq_first_offset(p_partition uuid, p_log_start bigint, p_last_offset bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_last_offset < p_log_start THEN p_log_start
                ELSE coalesce((SELECT s.base_offset FROM rq_segments s WHERE s.partition_id = p_partition
                               ORDER BY s.base_offset LIMIT 1), p_last_offset + 1) END
$$;

-- Where a cursor that does not exist yet starts (the group's durable subscription decides):
-- before the first stored message, or after the last segment pushed before its start instant.
CREATE OR REPLACE FUNCTION rq_seed_cursor(p_partition uuid, p_log_start bigint, p_last_offset bigint,
                                          p_from timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(CASE WHEN p_from IS NOT NULL THEN
                        (SELECT s.end_offset FROM rq_segments s
                         WHERE s.partition_id = p_partition AND s.created_at < p_from
                         ORDER BY s.base_offset DESC LIMIT 1) END,
                    rq_first_offset(p_partition, p_log_start, p_last_offset) - 1)
$$;

-- The messages of a partition a reader has yet to consume: those past p_done (what it has
-- committed; for a queue, what the least advanced of the partition's cursors has: "worst
-- cursor"), or the whole stored log from p_first when it has read nothing (p_done NULL), never
-- what lies below the log start. For a queue, the rule retention uses to decide what every
-- reader is done with. One definition for the pop, the push's maxSize, the statistics and the
-- resources: a plain IMMUTABLE SQL expression using each argument once, so the planner inlines
-- it where it is called (it costs what the expression written out costs, and p_first is
-- evaluated only when p_done is NULL).
CREATE OR REPLACE FUNCTION rq_pending(p_last_offset bigint, p_log_start bigint, p_first bigint, p_done bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(p_last_offset - greatest(coalesce(p_done, p_first - 1), p_log_start - 1), 0)
$$;

-- Wildcard candidates without reading every partition of the queue (a queue may hold a
-- million): partitions of this group whose lease has expired (an index on expiring leases) ...
CREATE OR REPLACE FUNCTION rq_pop_expired(p_qids bigint[], p_group text, p_limit int)
RETURNS uuid[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT c.partition_id
        FROM rq_consumers c JOIN rq_partitions p ON p.id = c.partition_id
        WHERE c.consumer_group = p_group AND c.span_end IS NOT NULL AND c.lease_expires_at <= now()
          AND p.queue_id = ANY (p_qids) AND p.last_offset > c.committed
        LIMIT p_limit)
$$;

-- Expired leases of every queue, for the lease watcher of each broker process
-- (engine/lease_watcher.py): a lease that runs out announces nothing, so each process looks twice a
-- second and hands what it finds to its readers as hints. The expiring-lease index holds only
-- the spans in flight, so this reads what is leased, not the queues.
CREATE OR REPLACE FUNCTION rq_expired_leases(p_limit int)
RETURNS TABLE (queue_name text, consumer_group text, partition_id uuid) LANGUAGE sql STABLE AS $$
    SELECT q.name, c.consumer_group, c.partition_id
    FROM rq_consumers c
    JOIN rq_partitions p ON p.id = c.partition_id
    JOIN rq_queues q ON q.id = p.queue_id
    WHERE c.span_end IS NOT NULL AND c.lease_expires_at <= now()
    ORDER BY c.lease_expires_at
    LIMIT p_limit
$$;

-- ... and pending partitions among the most recently written ones (an index on last_write_at).
-- Pending = data beyond the group's cursor and no live lease. Random order spreads pollers.
-- Across the queues of a namespace the 1,024 most recent are shared out (at least 16 a queue),
-- so that a thousand queues cost what one does; what this leaves out is the sweep's.
CREATE OR REPLACE FUNCTION rq_pop_recent(p_qids bigint[], p_group text, p_limit int)
RETURNS uuid[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT id FROM (
            SELECT r.id
            FROM unnest(p_qids) AS qid
            CROSS JOIN LATERAL (SELECT p.id, p.last_offset, p.log_start FROM rq_partitions p
                                WHERE p.queue_id = qid
                                ORDER BY p.last_write_at DESC NULLS LAST
                                LIMIT greatest(16, 1024 / cardinality(p_qids))) r
            LEFT JOIN rq_consumers c ON c.partition_id = r.id AND c.consumer_group = p_group
            WHERE r.last_offset >= r.log_start
              AND (c.partition_id IS NULL
                   OR (r.last_offset > c.committed AND (c.span_end IS NULL OR c.lease_expires_at <= now())))
            LIMIT p_limit
        ) found
        ORDER BY random())
$$;

CREATE OR REPLACE FUNCTION rq_pop_candidates(p_qids bigint[], p_group text, p_limit int)
RETURNS uuid[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT DISTINCT ON (id) id
        FROM unnest(rq_pop_expired(p_qids, p_group, p_limit) || rq_pop_recent(p_qids, p_group, p_limit)) id
        LIMIT p_limit)
$$;

-- The broker's hints (engine/hot_partitions.py: partitions recent pushes announced) that are pending
-- for this group, in the order given. Costs two key lookups a hint, however large the queue:
-- the partition is looked up in a LATERAL subquery, which the planner cannot turn into a hash
-- join that reads the whole partition table (its choice when the table is small).
-- Its plan is the generic one: statements over an array argument are otherwise planned afresh
-- on every call (a custom plan sees the array's true length and always looks cheaper than
-- the generic plan's guess), and that planning costs more than running the statement.
CREATE OR REPLACE FUNCTION rq_pop_hinted(p_qids bigint[], p_group text, p_hints uuid[])
RETURNS uuid[] LANGUAGE sql STABLE SET plan_cache_mode = force_generic_plan AS $$
    SELECT ARRAY(
        SELECT h.id
        FROM unnest(p_hints) WITH ORDINALITY AS h(id, ord)
        CROSS JOIN LATERAL (SELECT p.last_offset FROM rq_partitions p
                            WHERE p.id = h.id AND p.queue_id = ANY (p_qids) AND p.last_offset >= p.log_start
                            LIMIT 1) p
        LEFT JOIN rq_consumers c ON c.partition_id = h.id AND c.consumer_group = p_group
        WHERE c.partition_id IS NULL
           OR (p.last_offset > c.committed AND (c.span_end IS NULL OR c.lease_expires_at <= now()))
        ORDER BY h.ord)
$$;

-- When nothing else finds work: the sweep. It walks the queues' partitions in (queue, name)
-- order -- the order of the index that makes names unique, so the sweep costs no index of its
-- own -- from where the caller's last sweep stopped (exclusive), 2,048 at a time, for pending
-- partitions written long ago (a group reading an old backlog). Partitions written since
-- p_before are left out: the broker's hints announced them (engine/hot_partitions.py), so a sweep
-- that finds work is a backlog being read (the broker lets the next pop sweep at once), not
-- consumers that keep up meeting data announced a moment later. Queues with delayed
-- processing or a window buffer are swept whole: a pop drops a hint that came too early.
-- Returns the candidates and where the next sweep starts: just before the first candidate (it
-- is found again if it is not claimed now), or after the window when it held none; NULL once
-- the walk wrapped around, or at once when no partition of these queues was written before
-- p_before (one probe of the recent-writes index): then there is nothing a sweep could find,
-- and walking every partition written since, window by window, would cost more than a
-- retention walk.
CREATE OR REPLACE FUNCTION rq_pop_sweep(p_qids bigint[], p_group text, p_from_queue bigint, p_from_name text,
                                        p_limit int, p_before timestamptz, OUT candidates uuid[],
                                        OUT next_queue bigint, OUT next_name text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_ids     uuid[];
    v_queues  bigint[];
    v_names   text[];
    v_pending bool[];
    v_first   int;
    -- queues whose hints may come early (a pop drops them): swept whole
    v_early   bigint[] := ARRAY(SELECT q.id FROM rq_queues q WHERE q.id = ANY (p_qids)
                                AND (q.delayed_processing > 0 OR q.window_buffer > 0));
BEGIN
    IF p_before IS NOT NULL AND cardinality(v_early) = 0
       AND NOT EXISTS (SELECT 1 FROM unnest(p_qids) AS k(qid)
                       WHERE EXISTS (SELECT 1 FROM rq_partitions p
                                     WHERE p.queue_id = k.qid AND p.last_write_at < p_before)) THEN
        candidates := '{}';
        RETURN;
    END IF;
    -- One pass over the window: each partition row is read once, and its cursor only when its
    -- log_start says the partition holds something (an evicted partition does not).
    SELECT coalesce(array_agg(w.id ORDER BY w.queue_id, w.name), '{}'),
           array_agg(w.queue_id ORDER BY w.queue_id, w.name), array_agg(w.name ORDER BY w.queue_id, w.name),
           array_agg(w.last_offset >= w.log_start
                     AND (p_before IS NULL OR w.last_write_at < p_before OR w.queue_id = ANY (v_early))
                     AND NOT EXISTS (SELECT 1 FROM rq_consumers c
                                     WHERE c.partition_id = w.id AND c.consumer_group = p_group
                                       AND (w.last_offset <= c.committed
                                            OR (c.span_end IS NOT NULL AND c.lease_expires_at > now())))
                     -- a consumed prefix deleted without moving log_start: a reader new to a
                     -- queue of emptied partitions would otherwise leave a cursor in each
                     AND w.last_offset >= rq_first_offset(w.id, w.log_start, w.last_offset)
                     ORDER BY w.queue_id, w.name)
    INTO v_ids, v_queues, v_names, v_pending
    FROM (SELECT p.id, p.queue_id, p.name, p.last_offset, p.log_start, p.last_write_at FROM rq_partitions p
          WHERE p.queue_id = ANY (p_qids)
            AND (p_from_queue IS NULL OR (p.queue_id, p.name) > (p_from_queue, p_from_name))
          ORDER BY p.queue_id, p.name LIMIT 2048) w;
    SELECT array_agg(k.id ORDER BY k.ord), min(k.ord) INTO candidates, v_first
    FROM (SELECT t.id, t.ord FROM unnest(v_ids, v_pending) WITH ORDINALITY AS t(id, pending, ord)
          WHERE t.pending ORDER BY t.ord LIMIT p_limit) k;
    candidates := coalesce(candidates, '{}');
    IF v_first > 1 THEN
        next_queue := v_queues[v_first - 1];
        next_name := v_names[v_first - 1];
    ELSIF v_first = 1 THEN
        next_queue := p_from_queue;
        next_name := p_from_name;
    ELSIF cardinality(v_ids) = 2048 THEN
        next_queue := v_queues[2048];
        next_name := v_names[2048];
    END IF;
END;
$$;

-- A named group's durable subscription on each of these queues it has not read before, with its
-- delivery policy (p_conflation: NULL when the pop did not say, which registers plain delivery);
-- returns how many it registered and the queues on which the group conflates. A policy stored
-- earlier wins over the pop's; where another pop is registering the group at this moment, this
-- pop's own policy applies to it once. Generic plans (see rq_pop_hinted) for the same reason.
CREATE OR REPLACE FUNCTION rq_register_group(p_qids bigint[], p_group text, p_sub_mode text,
                                             p_sub_from timestamptz, p_conflation bool,
                                             OUT registered int, OUT conflating bigint[])
LANGUAGE sql SET plan_cache_mode = force_generic_plan AS $$
    WITH known AS (
        SELECT g.queue_id, g.conflation FROM rq_consumer_groups g
        WHERE g.queue_id = ANY (p_qids) AND g.name = p_group
    ), added AS (
        INSERT INTO rq_consumer_groups (queue_id, name, subscription_mode, subscription_from, conflation)
        SELECT q.id, p_group, p_sub_mode,
               CASE WHEN p_sub_mode = 'new' THEN coalesce(p_sub_from, now()) ELSE p_sub_from END,
               coalesce(p_conflation, false)
        FROM rq_queues q
        WHERE q.id = ANY (p_qids) AND q.id NOT IN (SELECT k.queue_id FROM known k)
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*)::int FROM added),
           ARRAY(SELECT qid FROM unnest(p_qids) AS qid LEFT JOIN known k ON k.queue_id = qid
                 WHERE coalesce(k.conflation, p_conflation, false))
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
    p_sub_from        timestamptz,
    p_sweep_queue     bigint,
    p_sweep_name      text,
    p_may_sweep       bool,
    p_hints           uuid[],
    p_hinted_since    timestamptz,
    p_scan            bool,
    p_conflation      bool,
    p_report          bool
) RETURNS TABLE (queue_name text, partition_id uuid, partition_name text, created_at timestamptz,
                 attempt int, payloads bytea[], sweep_queue bigint, sweep_name text, swept bool,
                 hints_left uuid[], first_offset bigint, conflating bool)
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
    v_qids     bigint[];
    v_cands    uuid[];
    v_sweep_queue bigint := p_sweep_queue;
    v_sweep_name  text := p_sweep_name;
    v_delivered bool := false;
    v_window   int;
    v_live     bigint;
    v_limit    int := greatest(64, p_max_partitions * 4);  -- candidates a lookup returns
    v_returnable uuid[] := '{}';  -- candidates that go back to the broker if not reached
    v_exit_ord bigint;
    v_swept    bool;  -- NULL: the sweep did not run; else whether it found work
    v_moves    rq_stats_move[] := '{}';  -- what this call moved, for the statistics (012_stats.sql)
    v_registered int := 0;  -- durable subscriptions this call registered
    v_conflating bigint[] := '{}';  -- the queues on which this group gets only the newest message
    v_conflate bool;
    v_tail     bigint;
    v_skip_to  bigint;
BEGIN
    -- The queues this pop reads. A pop names its queue (the common case) or a namespace/task
    -- selection; the two statements are kept apart so that each keeps one cached plan (a single
    -- statement with "p_queue IS NULL OR ..." would be planned afresh on every call).
    IF p_queue IS NOT NULL THEN
        v_qids := ARRAY(SELECT q.id FROM rq_queues q
                        WHERE q.name = p_queue
                          AND (p_namespace IS NULL OR q.namespace = p_namespace)
                          AND (p_task IS NULL OR q.task = p_task));
    ELSE
        v_qids := ARRAY(SELECT q.id FROM rq_queues q
                        WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
                          AND (p_task IS NULL OR q.task = p_task));
    END IF;
    IF cardinality(v_qids) = 0 THEN
        -- Nothing to read: a sweep that found nothing (the broker pauses the next), and no
        -- policy to report (NULL: the group has no queue here to register on yet).
        IF p_may_sweep OR p_report THEN
            RETURN QUERY SELECT NULL::text, NULL::uuid, NULL::text, NULL::timestamptz, NULL::int,
                                NULL::bytea[], NULL::bigint, NULL::text, false, '{}'::uuid[], NULL::bigint,
                                NULL::bool;
        END IF;
        RETURN;
    END IF;

    -- A named group registers its durable subscription (and delivery policy) on every queue it
    -- first reads.
    IF NOT v_queue_mode THEN
        SELECT r.registered, r.conflating INTO v_registered, v_conflating
        FROM rq_register_group(v_qids, p_group, p_sub_mode, p_sub_from, p_conflation) r;
    END IF;

    IF p_partition IS NOT NULL THEN
        v_cands := ARRAY(SELECT p.id FROM rq_partitions p
                         WHERE p.queue_id = ANY (v_qids) AND p.name = p_partition);
    ELSE
        -- Expired leases and the broker's hints first: both cost what they find. The lookup of
        -- recent writes, whose cost grows with the active partitions, runs when the broker
        -- asks (p_scan: see engine/hot_partitions.py), so that work written before the hints began
        -- does not wait behind a stream of hinted work; what it finds then goes first. The
        -- sweep runs when nothing else found work, paced by the broker (engine/pop.py), over
        -- partitions written before the hints began (p_hinted_since; NULL: all).
        v_cands := rq_pop_expired(v_qids, p_group, v_limit);
        IF cardinality(p_hints) > 0 THEN
            v_returnable := rq_pop_hinted(v_qids, p_group, p_hints);
            v_cands := v_cands || v_returnable;
        END IF;
        IF p_scan THEN
            v_cands := ARRAY(SELECT id FROM unnest(rq_pop_recent(v_qids, p_group, v_limit) || v_cands)
                                            WITH ORDINALITY AS k(id, ord)
                             GROUP BY id ORDER BY min(ord));
            v_returnable := v_cands;
        END IF;
        IF cardinality(v_cands) = 0 AND p_may_sweep THEN
            -- A bounded number of sweep windows per pop (an idle million-partition queue must
            -- stay cheap); a long poll's re-checks carry the sweep on from where it stopped.
            FOR v_window IN 1 .. 8 LOOP
                SELECT s.candidates, s.next_queue, s.next_name INTO v_cands, v_sweep_queue, v_sweep_name
                FROM rq_pop_sweep(v_qids, p_group, v_sweep_queue, v_sweep_name, v_limit, p_hinted_since) s;
                EXIT WHEN cardinality(v_cands) > 0 OR (v_sweep_queue IS NULL AND p_sweep_queue IS NULL);
            END LOOP;
            v_swept := cardinality(v_cands) > 0;
            v_returnable := v_cands;
        END IF;
    END IF;

    FOR v_cand IN
        SELECT p.id, p.name, p.log_start, p.last_offset, q.name AS qname, q.id AS qid,
               q.lease_time, q.delayed_processing, q.ttl_seconds, k.ord
        FROM unnest(v_cands) WITH ORDINALITY AS k(id, ord)
        JOIN rq_partitions p ON p.id = k.id
        JOIN rq_queues q ON q.id = p.queue_id
        WHERE p.last_offset >= p.log_start
          AND (q.window_buffer = 0 OR p.last_write_at <= now() - make_interval(secs => q.window_buffer))
        ORDER BY k.ord
    LOOP
        IF v_claimed >= p_max_partitions OR v_budget <= 0 THEN
            v_exit_ord := v_cand.ord;
            EXIT;
        END IF;

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
            -- Several pollers meeting a new partition at once would queue behind each other's
            -- uncommitted insert of the same cursor; one creates it, the others move on.
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended(v_cand.id::text || p_group, 0));
            INSERT INTO rq_consumers AS c (partition_id, consumer_group, committed)
            VALUES (v_cand.id, p_group, rq_seed_cursor(v_cand.id, v_cand.log_start, v_cand.last_offset, v_sub_from))
            ON CONFLICT DO NOTHING
            RETURNING * INTO v_cur;
            CONTINUE WHEN NOT FOUND;
        END IF;
        CONTINUE WHEN v_cur.span_end IS NOT NULL AND v_cur.lease_expires_at > now();

        v_conflate := v_cand.qid = ANY (v_conflating);
        v_from := greatest(v_cur.committed + 1, v_cand.log_start);
        SELECT p.last_offset INTO v_to FROM rq_partitions p WHERE p.id = v_cand.id;
        -- ttl: messages older than it are never delivered. Segments are written in time order,
        -- so the expired ones are a prefix of what is left: the cursor moves past them (this
        -- cursor is locked and has no live lease) and they are counted as expired.
        IF v_cand.ttl_seconds > 0 THEN
            v_live := coalesce((SELECT s.base_offset FROM rq_segments s
                                WHERE s.partition_id = v_cand.id
                                  AND s.base_offset >= coalesce((SELECT s2.base_offset FROM rq_segments s2
                                                                 WHERE s2.partition_id = v_cand.id
                                                                   AND s2.base_offset <= v_from
                                                                 ORDER BY s2.base_offset DESC LIMIT 1), v_from)
                                  AND s.created_at >= now() - make_interval(secs => v_cand.ttl_seconds)
                                ORDER BY s.base_offset LIMIT 1), v_to + 1);
            IF v_live > v_from THEN
                INSERT INTO rq_expired AS e (queue_id, consumer_group, expired)
                SELECT v_cand.qid, p_group, (v_live - v_from) - count(*)
                FROM rq_deleted d WHERE d.partition_id = v_cand.id
                  AND d.message_offset >= v_from AND d.message_offset < v_live
                ON CONFLICT (queue_id, consumer_group) DO UPDATE SET expired = e.expired + EXCLUDED.expired;
                UPDATE rq_consumers c SET committed = v_live - 1, retry_count = 0
                WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group;
                v_moves := v_moves || ROW(v_cand.qid, p_group, 0, 0, 0, v_live - v_from)::rq_stats_move;
                v_cur.committed := v_live - 1;
                v_from := v_live;
            END IF;
        END IF;
        -- A conflating group reads up to the newest message; any other reader up to its budget.
        IF NOT v_conflate THEN
            v_to := least(v_to, v_from + v_budget - 1);
        END IF;
        IF v_cand.delayed_processing > 0 THEN
            SELECT max(s.end_offset) INTO v_visible FROM rq_segments s
            WHERE s.partition_id = v_cand.id AND s.base_offset <= v_to
              AND s.end_offset >= v_from
              AND s.created_at <= now() - make_interval(secs => v_cand.delayed_processing);
            v_to := least(v_to, coalesce(v_visible, v_from - 1));
        END IF;
        -- Where the cursor moves before delivery, passing messages no reader will be handed.
        v_skip_to := NULL;
        IF v_conflate AND v_to >= v_from THEN
            -- Last-value delivery: only the newest visible message that was not deleted goes
            -- out; everything behind it is retired now (counted as skipped), so its lease covers
            -- one message and its ack, retry and dead-lettering are those of any one message.
            v_tail := v_to;
            IF EXISTS (SELECT 1 FROM rq_deleted d WHERE d.partition_id = v_cand.id
                         AND d.message_offset BETWEEN v_from AND v_to) THEN
                WHILE v_tail >= v_from AND EXISTS (SELECT 1 FROM rq_deleted d WHERE d.partition_id = v_cand.id
                                                     AND d.message_offset = v_tail) LOOP
                    v_tail := v_tail - 1;
                END LOOP;
                IF v_tail < v_from THEN
                    v_tail := v_to + 1;  -- every visible message was deleted: all of it is retired
                END IF;
            END IF;
            v_skip_to := v_tail - 1;
            v_from := v_tail;
            v_to := least(v_to, v_tail);
        ELSIF EXISTS (SELECT 1 FROM rq_deleted d WHERE d.partition_id = v_cand.id
                        AND d.message_offset BETWEEN v_from AND v_to) THEN
            -- Deleted messages (rq_deleted, 010_messages.sql) are never delivered: leading ones
            -- count as consumed (this cursor is locked and has no live lease), and the span stops
            -- before the next one, so every leased offset is a real message and ack counting holds.
            WHILE v_from <= v_to AND EXISTS (SELECT 1 FROM rq_deleted d WHERE d.partition_id = v_cand.id
                                               AND d.message_offset = v_from) LOOP
                v_from := v_from + 1;
            END LOOP;
            v_skip_to := v_from - 1;
            v_to := coalesce((SELECT min(d.message_offset) - 1 FROM rq_deleted d
                              WHERE d.partition_id = v_cand.id AND d.message_offset BETWEEN v_from AND v_to), v_to);
        END IF;
        IF v_skip_to > v_cur.committed THEN
            UPDATE rq_consumers c SET committed = v_skip_to
            WHERE c.partition_id = v_cand.id AND c.consumer_group = p_group;
            v_moves := v_moves || ROW(v_cand.qid, p_group, 0, 0, 0,
                                      v_skip_to - greatest(v_cur.committed, v_cand.log_start - 1))::rq_stats_move;
            v_cur.committed := v_skip_to;
        END IF;
        CONTINUE WHEN v_to < v_from;

        v_attempt := CASE WHEN v_from <= v_cur.last_delivered THEN v_cur.attempts + 1 ELSE 1 END;
        -- first deliveries count as popped (a redelivery counts nothing); with auto-ack the span is
        -- consumed at once
        IF p_auto_ack OR v_to > v_cur.last_delivered THEN
            v_moves := v_moves || ROW(v_cand.qid, p_group, greatest(v_to - greatest(v_cur.last_delivered, v_from - 1), 0),
                                      CASE WHEN p_auto_ack THEN v_to - v_from + 1 ELSE 0 END, 0, 0)::rq_stats_move;
        END IF;
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

        v_delivered := true;
        RETURN QUERY
        SELECT v_cand.qname, v_cand.id, v_cand.name, s.created_at, v_attempt,
               s.payloads[(greatest(s.base_offset, v_from) - s.base_offset + 1)
                          :(least(s.end_offset, v_to) - s.base_offset + 1)],
               v_sweep_queue, v_sweep_name, v_swept, NULL::uuid[], greatest(s.base_offset, v_from), v_conflate
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

    IF cardinality(v_moves) > 0 THEN
        PERFORM rq_stats_note(v_moves);
    END IF;

    -- A lease is not worth an fsync: the pop answers without waiting for its commit to reach the
    -- disk (or a synchronous standby). Should the database crash within the WAL writer's delay,
    -- the lease is forgotten and its messages are delivered again at once, as after a lease
    -- expiry, and the first consumer's ack of it fails: at-least-once holds. Any later durable
    -- commit (the ack of these messages, a push) makes the lease durable too, the WAL being one
    -- sequence. So pops stay out of the wait at the WAL flush, which pushes and acks must make.
    -- An auto-ack pop consumes what it delivers, and a pop that registered a group's
    -- subscription fixed where the group starts: both stay durable.
    IF v_delivered AND NOT p_auto_ack AND v_registered = 0 THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;

    -- Pending hints (or sweep finds) the pop did not get to (its limits were reached first) go
    -- back to the broker; the others were claimed, or are leased (their ack announces them).
    IF v_exit_ord IS NOT NULL THEN
        v_returnable := ARRAY(SELECT k.id FROM unnest(v_cands) WITH ORDINALITY AS k(id, ord)
                              WHERE k.ord >= v_exit_ord AND k.id = ANY (v_returnable));
    ELSE
        v_returnable := '{}';
    END IF;
    IF cardinality(v_returnable) > 0 OR (NOT v_delivered AND v_swept IS NOT NULL) OR p_report THEN
        -- a last row without a message: where the sweep stands, the hints handed back, and
        -- whether the group conflates on the queues read (p_report: the broker asks once)
        RETURN QUERY SELECT NULL::text, NULL::uuid, NULL::text, NULL::timestamptz, NULL::int,
                            NULL::bytea[], v_sweep_queue, v_sweep_name, v_swept, v_returnable, NULL::bigint,
                            cardinality(v_conflating) > 0;
    END IF;
END;
$$;

-- minPopWaitTime: how many messages a pop of this group could take now (from at most
-- p_partitions partitions of the queue, or the one named), counted up to p_batch. The long
-- poll holds an under-full batch while this stays below the batch size (see pop.py).
CREATE OR REPLACE FUNCTION rq_pop_ready(p_queue text, p_partition text, p_group text,
                                        p_partitions int, p_batch int)
RETURNS bigint LANGUAGE sql STABLE AS $$
    WITH queue AS (SELECT q.id FROM rq_queues q WHERE q.name = p_queue),
    candidates AS (
        SELECT p.id FROM queue JOIN rq_partitions p ON p.queue_id = queue.id AND p.name = p_partition
        WHERE p_partition IS NOT NULL
        UNION ALL
        SELECT unnest(rq_pop_candidates(ARRAY(SELECT id FROM queue), p_group, greatest(64, p_partitions * 4)))
        WHERE p_partition IS NULL
    )
    SELECT least(coalesce(sum(ready), 0), p_batch) FROM (
        SELECT rq_pending(p.last_offset, p.log_start, rq_first_offset(p.id, p.log_start, p.last_offset), c.committed)
               AS ready
        FROM candidates k
        JOIN rq_partitions p ON p.id = k.id
        LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
        WHERE c.partition_id IS NULL OR c.span_end IS NULL OR c.lease_expires_at <= now()
        ORDER BY ready DESC
        LIMIT p_partitions
    ) best
$$;
