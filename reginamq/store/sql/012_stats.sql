-- Statistics: per-queue counters and gauges, the same whichever worker process or node served
-- the traffic. The hot paths note what they moved, in the transaction that moves it, as one
-- row per call and queue (rq_stats_notes and its row type rq_stats_move, created with the hot
-- paths' tables in 001_queues_and_partitions.sql): push the messages written and the partitions
-- created, pop and ack per consumer group the messages
--   popped        delivered for the first time
--   acked         consumed: acknowledged (completed, dead-lettered or dropped), or delivered
--                 with auto-ack
--   failed        charged failures (one per delivery that failed)
--   skipped       stepped over by a pop: expired by the ttl, or deleted
-- so the group's read position advanced by acked + skipped. A refresh (the elected stats loop
-- every few seconds, or POST /api/v1/stats/refresh) sums the notes its snapshot sees into the
-- current time bucket and the totals, then deletes exactly those notes (it runs in a REPEATABLE
-- READ transaction: its DELETE cannot see a note committed after its snapshot, which stays for
-- the next refresh). Dead letters are counted from rq_dlq by failed_at. Its cost is what moved,
-- however many partitions the queues have.
--
-- The gauges are depth (what the queue-mode reader still has to read), lag (the largest backlog
-- of a named consumer group) and dlq_depth. A full pass counts depth and backlogs over every
-- partition, so its cost grows with them; an incremental refresh carries the last values
-- forward by what it booked (depth + pushed - the queue-mode reader's advance), exact because a
-- refresh reads one snapshot. What moves a read position without a note (a seek, a group deleted,
-- retention evicting unread messages or deleting partitions) corrects the gauges at the next
-- full pass, which the stats loop runs at least every ten minutes (maintenance/stats_refresh.py); none
-- of those is a count of the traffic.

-- Counters moved and gauges at the end of each time bucket, per queue: the series.
CREATE TABLE IF NOT EXISTS rq_stats (
    queue_id       bigint NOT NULL,
    bucket         timestamptz NOT NULL,
    pushed         bigint NOT NULL DEFAULT 0,
    popped         bigint NOT NULL DEFAULT 0,
    acked          bigint NOT NULL DEFAULT 0,
    failed         bigint NOT NULL DEFAULT 0,
    dead_lettered  bigint NOT NULL DEFAULT 0,
    depth          bigint NOT NULL DEFAULT 0,
    lag            bigint NOT NULL DEFAULT 0,
    dlq_depth      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, bucket)
);
CREATE INDEX IF NOT EXISTS rq_stats_bucket ON rq_stats (bucket);

-- Cumulative counters (what Prometheus reads) and the latest gauges, per queue.
CREATE TABLE IF NOT EXISTS rq_stats_totals (
    queue_id       bigint PRIMARY KEY,
    pushed         bigint NOT NULL DEFAULT 0,
    popped         bigint NOT NULL DEFAULT 0,
    acked          bigint NOT NULL DEFAULT 0,
    failed         bigint NOT NULL DEFAULT 0,
    dead_lettered  bigint NOT NULL DEFAULT 0,
    depth          bigint NOT NULL DEFAULT 0,
    lag            bigint NOT NULL DEFAULT 0,
    dlq_depth      bigint NOT NULL DEFAULT 0,
    partitions     bigint NOT NULL DEFAULT 0,
    refreshed_at   timestamptz NOT NULL DEFAULT now()
);

-- Backlog per (queue, named group) at the last refresh.
CREATE TABLE IF NOT EXISTS rq_stats_groups (
    queue_id        bigint NOT NULL,
    consumer_group  text NOT NULL,
    backlog         bigint NOT NULL,
    partitions_behind bigint NOT NULL,
    PRIMARY KEY (queue_id, consumer_group)
);

-- The refreshes' own state, one row: dead letters are counted up to dlq_until; full_at and
-- full_seconds say when the last full pass started and how long it took, by which the stats
-- loop spaces full passes (maintenance/stats_refresh.py).
CREATE TABLE IF NOT EXISTS rq_stats_state (
    id            int PRIMARY KEY CHECK (id = 1),
    dlq_until     timestamptz NOT NULL,
    refreshed_at  timestamptz NOT NULL,
    full_at       timestamptz,
    full_seconds  double precision
);

-- A pop's or an ack's notes: one rq_stats_move per cursor it moved, summed per
-- (queue, group) into one row each. plpgsql, not sql: its plan is kept for the session, a hot
-- path does not plan it per call.
CREATE OR REPLACE FUNCTION rq_stats_note(p_moves rq_stats_move[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rq_stats_notes (queue_id, consumer_group, popped, acked, failed, skipped)
    SELECT m.queue_id, m.consumer_group, sum(m.popped), sum(m.acked), sum(m.failed), sum(m.skipped)
    FROM unnest(p_moves) m
    GROUP BY m.queue_id, m.consumer_group;
END;
$$;

-- One refresh: a full pass (p_full, its default, and always the first) or an incremental one
-- (engine/analytics.py runs it through store/statistics.py; the stats loop decides which, maintenance/stats_refresh.py). Serialised by
-- the lock of rq_stats_state, so two refreshes never book the same note twice. Returns the
-- number of queues.
CREATE OR REPLACE FUNCTION rq_stats_refresh(p_bucket_seconds int, p_keep_seconds int, p_full bool DEFAULT true)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_now       timestamptz;
    v_bucket    timestamptz;
    v_dlq_from  timestamptz;
    v_dlq_until timestamptz;
    v_full      bool;
    v_full_at   timestamptz;
    v_n         int;
BEGIN
    -- One snapshot for everything below (see the top of this file). A READ COMMITTED caller
    -- would get a snapshot per statement: notes deleted unread, gauges that drift.
    IF current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'rq_stats_refresh must run in a REPEATABLE READ transaction';
    END IF;
    -- Callers take this lock before their transaction's snapshot (store/statistics.py: LOCK TABLE
    -- takes none), so it is taken after the previous refresh committed. A caller that did not
    -- may hold a snapshot older than a refresh that committed while it waited: locking the
    -- state row then raises a serialization failure (retry with a fresh snapshot) instead of
    -- booking that refresh's notes a second time; two first refreshes meet at the final insert.
    LOCK TABLE rq_stats_state IN EXCLUSIVE MODE;
    SELECT s.dlq_until, s.full_at INTO v_dlq_from, v_full_at FROM rq_stats_state s WHERE s.id = 1 FOR UPDATE;
    v_full := p_full OR v_full_at IS NULL;  -- an incremental refresh adjusts what a full pass left
    v_now := clock_timestamp();
    v_bucket := to_timestamp(floor(extract(epoch FROM v_now) / p_bucket_seconds) * p_bucket_seconds);
    -- Dead letters are counted by failed_at a little behind now: an ack transaction stamped
    -- before this instant but not committed yet is counted by the next refresh.
    v_dlq_until := v_now - interval '2 seconds';
    IF v_dlq_from IS NOT NULL AND v_dlq_until < v_dlq_from THEN
        v_dlq_until := v_dlq_from;
    END IF;

    -- The notes summed per reader (queue, consumer group; NULL: the pushes) and the dead letters
    -- since the last refresh, per queue.
    CREATE TEMP TABLE IF NOT EXISTS rq_stats_noted (
        queue_id bigint, consumer_group text, pushed bigint, partitions bigint, popped bigint, acked bigint,
        failed bigint, advance bigint, dead bigint
    ) ON COMMIT DROP;
    INSERT INTO rq_stats_noted
    SELECT n.queue_id, n.consumer_group, sum(n.pushed), sum(n.partitions), sum(n.popped), sum(n.acked),
           sum(n.failed), sum(n.acked + n.skipped), 0
    FROM rq_stats_notes n GROUP BY n.queue_id, n.consumer_group;
    INSERT INTO rq_stats_noted (queue_id, dead)
    SELECT d.queue_id, count(*) FROM rq_dlq d
    WHERE (v_dlq_from IS NULL OR d.failed_at >= v_dlq_from) AND d.failed_at < v_dlq_until
    GROUP BY d.queue_id;

    IF v_full THEN
        -- Per named group: its backlog over the queue's partitions (a partition it has not read
        -- yet counts from where its cursor would start).
        DELETE FROM rq_stats_groups;
        INSERT INTO rq_stats_groups (queue_id, consumer_group, backlog, partitions_behind)
        SELECT g.queue_id, g.name, sum(b.n), count(*) FILTER (WHERE b.n > 0)
        FROM rq_consumer_groups g
        JOIN rq_partitions p ON p.queue_id = g.queue_id
        LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = g.name
        CROSS JOIN LATERAL (
            SELECT greatest(p.last_offset - greatest(coalesce(c.committed,
                                                              rq_seed_cursor(p.id, p.log_start, p.last_offset,
                                                                             g.subscription_from)),
                                                     p.log_start - 1), 0) AS n
        ) b
        GROUP BY g.queue_id, g.name;
    ELSE
        -- A backlog grows by what its queue received and shrinks by how far the group read.
        -- partitions_behind stays as the last full pass counted it; a group that appeared since
        -- shows from the next full pass on.
        DELETE FROM rq_stats_groups sg WHERE NOT EXISTS (
            SELECT 1 FROM rq_consumer_groups g WHERE g.queue_id = sg.queue_id AND g.name = sg.consumer_group);
        UPDATE rq_stats_groups sg
        SET backlog = greatest(sg.backlog + m.n, 0)
        FROM (SELECT g.queue_id, g.consumer_group,
                     coalesce((SELECT sum(n.pushed) FROM rq_stats_noted n WHERE n.queue_id = g.queue_id), 0)
                     - coalesce((SELECT sum(n.advance) FROM rq_stats_noted n
                                 WHERE n.queue_id = g.queue_id AND n.consumer_group = g.consumer_group), 0) AS n
              FROM rq_stats_groups g) m
        WHERE sg.queue_id = m.queue_id AND sg.consumer_group = m.consumer_group AND m.n <> 0;
    END IF;

    -- Gauges and counters per queue, then the bucket. A full pass counts the depth and the
    -- partitions over every partition; an incremental refresh carries the last values forward.
    WITH deltas AS (
        SELECT n.queue_id, coalesce(sum(n.pushed), 0) AS pushed, coalesce(sum(n.popped), 0) AS popped,
               coalesce(sum(n.acked), 0) AS acked, coalesce(sum(n.failed), 0) AS failed,
               coalesce(sum(n.dead), 0) AS dead, coalesce(sum(n.partitions), 0) AS partitions,
               coalesce(sum(n.advance) FILTER (WHERE n.consumer_group = '__QUEUE_MODE__'), 0) AS advance
        FROM rq_stats_noted n GROUP BY n.queue_id
    ), gauges AS (
        SELECT q.id AS queue_id, coalesce(d.pushed, 0) AS pushed, coalesce(d.popped, 0) AS popped,
               coalesce(d.acked, 0) AS acked, coalesce(d.failed, 0) AS failed, coalesce(d.dead, 0) AS dead,
               CASE WHEN v_full THEN
                        coalesce((SELECT sum(rq_pending(p.last_offset, p.log_start,
                                                        rq_first_offset(p.id, p.log_start, p.last_offset),
                                                        c.committed))
                                  FROM rq_partitions p
                                  LEFT JOIN rq_consumers c ON c.partition_id = p.id
                                                          AND c.consumer_group = '__QUEUE_MODE__'
                                  WHERE p.queue_id = q.id), 0)
                    ELSE greatest(coalesce(t.depth, 0) + coalesce(d.pushed, 0) - coalesce(d.advance, 0), 0)
               END AS depth,
               coalesce((SELECT max(sg.backlog) FROM rq_stats_groups sg WHERE sg.queue_id = q.id), 0) AS lag,
               (SELECT count(*) FROM rq_dlq d WHERE d.queue_id = q.id) AS dlq_depth,
               CASE WHEN v_full THEN (SELECT count(*) FROM rq_partitions p WHERE p.queue_id = q.id)
                    ELSE coalesce(t.partitions, 0) + coalesce(d.partitions, 0)
               END AS partitions,
               t.queue_id IS NULL AS unseen, t.depth AS prev_depth, t.lag AS prev_lag, t.dlq_depth AS prev_dlq_depth
        FROM rq_queues q
        LEFT JOIN deltas d ON d.queue_id = q.id
        LEFT JOIN rq_stats_totals t ON t.queue_id = q.id
    ), joined AS MATERIALIZED (
        SELECT g.*, g.unseen OR g.prev_depth <> g.depth OR g.prev_lag <> g.lag
                    OR g.prev_dlq_depth <> g.dlq_depth AS moved
        FROM gauges g
    ), bucketed AS (
        INSERT INTO rq_stats AS s (queue_id, bucket, pushed, popped, acked, failed, dead_lettered, depth, lag,
                                   dlq_depth)
        SELECT j.queue_id, v_bucket, j.pushed, j.popped, j.acked, j.failed, j.dead, j.depth, j.lag, j.dlq_depth
        FROM joined j
        WHERE j.moved OR j.pushed + j.popped + j.acked + j.failed + j.dead > 0
        ON CONFLICT (queue_id, bucket) DO UPDATE
            SET pushed = s.pushed + EXCLUDED.pushed, popped = s.popped + EXCLUDED.popped,
                acked = s.acked + EXCLUDED.acked, failed = s.failed + EXCLUDED.failed,
                dead_lettered = s.dead_lettered + EXCLUDED.dead_lettered,
                depth = EXCLUDED.depth, lag = EXCLUDED.lag, dlq_depth = EXCLUDED.dlq_depth
    )
    INSERT INTO rq_stats_totals AS t (queue_id, pushed, popped, acked, failed, dead_lettered, depth, lag,
                                      dlq_depth, partitions, refreshed_at)
    SELECT j.queue_id, j.pushed, j.popped, j.acked, j.failed, j.dead, j.depth, j.lag, j.dlq_depth,
           j.partitions, v_now
    FROM joined j
    ON CONFLICT (queue_id) DO UPDATE
        SET pushed = t.pushed + EXCLUDED.pushed, popped = t.popped + EXCLUDED.popped,
            acked = t.acked + EXCLUDED.acked, failed = t.failed + EXCLUDED.failed,
            dead_lettered = t.dead_lettered + EXCLUDED.dead_lettered, depth = EXCLUDED.depth,
            lag = EXCLUDED.lag, dlq_depth = EXCLUDED.dlq_depth, partitions = EXCLUDED.partitions,
            refreshed_at = EXCLUDED.refreshed_at;
    GET DIAGNOSTICS v_n = ROW_COUNT;

    -- The notes this snapshot sees were booked; those committed since stay for the next refresh.
    -- Forget deleted queues and old buckets.
    DELETE FROM rq_stats_notes;
    DELETE FROM rq_stats_totals t WHERE NOT EXISTS (SELECT 1 FROM rq_queues q WHERE q.id = t.queue_id);
    DELETE FROM rq_stats s WHERE s.bucket < v_now - make_interval(secs => p_keep_seconds);

    INSERT INTO rq_stats_state AS s (id, dlq_until, refreshed_at, full_at, full_seconds)
    VALUES (1, v_dlq_until, v_now, v_now, extract(epoch FROM clock_timestamp() - v_now))
    ON CONFLICT (id) DO UPDATE
        SET dlq_until = EXCLUDED.dlq_until, refreshed_at = EXCLUDED.refreshed_at,
            full_at = CASE WHEN v_full THEN EXCLUDED.full_at ELSE s.full_at END,
            full_seconds = CASE WHEN v_full THEN EXCLUDED.full_seconds ELSE s.full_seconds END;
    RETURN v_n;
END;
$$;

-- Per-queue totals and gauges as of the last refresh (NULL queue: every queue).
CREATE OR REPLACE FUNCTION rq_stats_queues(p_queue text)
RETURNS TABLE (queue_name text, namespace text, task text, partitions bigint, pushed bigint, popped bigint,
               acked bigint, failed bigint, dead_lettered bigint, depth bigint, lag bigint, dlq_depth bigint,
               refreshed_at timestamptz, created_at timestamptz, expired bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.name, q.namespace, q.task, coalesce(t.partitions, 0), coalesce(t.pushed, 0), coalesce(t.popped, 0),
           coalesce(t.acked, 0), coalesce(t.failed, 0), coalesce(t.dead_lettered, 0), coalesce(t.depth, 0),
           coalesce(t.lag, 0), coalesce(t.dlq_depth, 0), t.refreshed_at, q.created_at,
           coalesce((SELECT sum(e.expired) FROM rq_expired e WHERE e.queue_id = q.id), 0)::bigint
    FROM rq_queues q
    LEFT JOIN rq_stats_totals t ON t.queue_id = q.id
    WHERE p_queue IS NULL OR q.name = p_queue
    ORDER BY q.name
$$;

-- Buckets between two instants folded into p_interval-second steps, per queue (or for one).
CREATE OR REPLACE FUNCTION rq_stats_series(p_queue text, p_from timestamptz, p_to timestamptz, p_interval int)
RETURNS TABLE (queue_name text, bucket timestamptz, pushed bigint, popped bigint, acked bigint, failed bigint,
               dead_lettered bigint, depth bigint, lag bigint, dlq_depth bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.name,
           to_timestamp(floor(extract(epoch FROM s.bucket) / p_interval) * p_interval) AS step,
           sum(s.pushed)::bigint, sum(s.popped)::bigint, sum(s.acked)::bigint, sum(s.failed)::bigint,
           sum(s.dead_lettered)::bigint,
           (array_agg(s.depth ORDER BY s.bucket DESC))[1], (array_agg(s.lag ORDER BY s.bucket DESC))[1],
           (array_agg(s.dlq_depth ORDER BY s.bucket DESC))[1]
    FROM rq_stats s
    JOIN rq_queues q ON q.id = s.queue_id
    WHERE (p_queue IS NULL OR q.name = p_queue) AND s.bucket >= p_from AND s.bucket <= p_to
    GROUP BY q.name, step
    ORDER BY step, q.name
$$;

CREATE OR REPLACE FUNCTION rq_stats_groups_of(p_queue text)
RETURNS TABLE (queue_name text, consumer_group text, backlog bigint, partitions_behind bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.name, g.consumer_group, g.backlog, g.partitions_behind
    FROM rq_stats_groups g JOIN rq_queues q ON q.id = g.queue_id
    WHERE p_queue IS NULL OR q.name = p_queue
    ORDER BY q.name, g.consumer_group
$$;

-- The planner's statistics of the tables a push and a pop plan against, taken as soon as they
-- hold p_min_rows rows and have never been analysed (reltuples -1): each backend plans these
-- statements once, and on a new database it does so while the tables are nearly empty; the
-- plans it keeps then read every partition of the queue, so pushes cost more with every
-- partition created, until autovacuum's first ANALYZE, which may be long in coming, replaces them.
-- An ANALYZE invalidates the cached plans. After that autovacuum keeps them up to date.
-- Returns how many tables were analysed.
CREATE OR REPLACE FUNCTION rq_analyze_new_tables(p_min_rows int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_table text;
    v_rows  int;
    v_done  int := 0;
BEGIN
    FOR v_table IN
        SELECT t FROM unnest(ARRAY['rq_partitions', 'rq_consumers', 'rq_segments']) t
        JOIN pg_class c ON c.oid = to_regclass(t)
        WHERE c.reltuples < 0
    LOOP
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %I LIMIT $1) x', v_table) INTO v_rows USING p_min_rows;
        IF v_rows >= p_min_rows THEN
            EXECUTE format('ANALYZE %I', v_table);
            v_done := v_done + 1;
        END IF;
    END LOOP;
    RETURN v_done;
END;
$$;
