-- Statistics: per-queue counters and gauges derived from the tables themselves, so they are
-- right whichever worker process or node served the traffic. A refresh (the elected stats
-- loop every few seconds, or POST /api/v1/stats/refresh) compares the tables with the
-- snapshot it kept last time and books the differences into the current time bucket:
--   pushed        partitions.last_offset advances
--   popped        cursors' last_delivered advances (first deliveries)
--   acked         cursors' committed advances (consumed: completed, dead-lettered or dropped)
--   failed        charged failures (cursors' retry_count increases; approximate)
--   dead_lettered rq_dlq rows by failed_at
-- and the gauges depth (what the queue-mode reader still has to read), lag (the largest
-- backlog of a named consumer group) and dlq_depth.
--
-- A full pass compares every cursor and recomputes the gauges over every partition: its cost
-- grows with the partitions (seconds at a million). An incremental refresh costs what moved:
-- it compares only the cursors the hot paths noted in rq_stats_touched, and adjusts the gauges
-- of the last refresh by what it booked (depth + pushed - the queue-mode reader's advance).
-- That is exact because a refresh reads one snapshot (it runs in a REPEATABLE READ
-- transaction): the gauges it leaves and the snapshots it remembers describe one instant, so
-- the next refresh's differences carry them forward. What moves the numbers without a touched
-- row (a seek, a group deleted, retention evicting unread messages or deleting partitions, a
-- crash emptying the unlogged touched table) waits for the next full pass, which the stats loop
-- runs at least every ten minutes (maintenance/stats.py).

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

-- What the previous refresh saw.
CREATE TABLE IF NOT EXISTS rq_stats_partitions (
    partition_id  uuid PRIMARY KEY,
    last_offset   bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS rq_stats_cursors (
    partition_id    uuid NOT NULL,
    consumer_group  text NOT NULL,
    committed       bigint NOT NULL,
    last_delivered  bigint NOT NULL,
    retry_count     int NOT NULL,
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE TABLE IF NOT EXISTS rq_stats_state (
    id            int PRIMARY KEY CHECK (id = 1),
    dlq_until     timestamptz NOT NULL,
    refreshed_at  timestamptz NOT NULL
);
-- When the last full pass started and how long it took: the stats loop spaces full passes by
-- their cost (maintenance/stats.py).
ALTER TABLE rq_stats_state ADD COLUMN IF NOT EXISTS full_at timestamptz;
ALTER TABLE rq_stats_state ADD COLUMN IF NOT EXISTS full_seconds double precision;
-- Where the next refresh starts looking for written partitions (rq_stats_write_horizon); NULL
-- when the refresh was given none: the next one then looks 30 s before that refresh.
ALTER TABLE rq_stats_state ADD COLUMN IF NOT EXISTS write_horizon timestamptz;

-- The instant every transaction of this database running now started at or after (this
-- instant when none runs), never more than p_max_seconds back; read before a refresh's
-- snapshot. A push that refresh cannot see yet either runs now or starts later, so its
-- partition's last_write_at (its lock instant, lagging by at most a second) is at most a
-- second older than this: the next refresh looks for written partitions from there instead of
-- a fixed margin, which at 1,000 new partitions a second read 35,000 partitions a refresh
-- where 7,000 had been written. A session this role may not see counts as p_max_seconds old.
CREATE OR REPLACE FUNCTION rq_stats_write_horizon(p_max_seconds int) RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    SELECT greatest(clock_timestamp() - make_interval(secs => p_max_seconds),
                    least(clock_timestamp(),
                          min(CASE WHEN a.state IS NULL THEN '-infinity'::timestamptz ELSE a.xact_start END)))
    FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
      AND (a.state IS NULL OR (a.backend_type = 'client backend' AND a.xact_start IS NOT NULL))
$$;

-- Cursors the hot paths moved (committed, last_delivered or retry_count), for the next
-- incremental refresh: rq_pop and rq_ack note every cursor of a call in one statement
-- (rq_stats_touch), in the transaction that moves them. A refresh reads the rows its snapshot
-- sees and then deletes exactly those (a DELETE in its REPEATABLE READ snapshot cannot see rows
-- committed after it), so each row is read once and a move committed after the snapshot keeps
-- its row for the next refresh. No key: a cursor noted by several calls is several rows, read
-- as one. Rarer paths (a seek, a group deleted, retention) write nothing here: the full pass
-- books them. Unlogged: a crash loses only what the next full pass books anyway.
CREATE UNLOGGED TABLE IF NOT EXISTS rq_stats_touched (
    partition_id    uuid NOT NULL,
    consumer_group  text NOT NULL
);
-- Databases made before: rows were keyed by the writer's second and kept for two seconds after
-- it, for writers that found their key taken and wrote nothing (every refresh read them again).
ALTER TABLE rq_stats_touched DROP CONSTRAINT IF EXISTS rq_stats_touched_pkey;
ALTER TABLE rq_stats_touched DROP COLUMN IF EXISTS second;

-- plpgsql, not sql: its plan is kept for the session, a hot path does not plan it per call.
CREATE OR REPLACE FUNCTION rq_stats_touch(p_partitions uuid[], p_groups text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rq_stats_touched (partition_id, consumer_group)
    SELECT t.pid, t.grp FROM unnest(p_partitions, p_groups) AS t(pid, grp);
END;
$$;

-- One refresh: a full pass (p_full, its default, and always the first) or an incremental one
-- (engine/stats.py runs it; the stats loop decides which, maintenance/stats.py). Serialised by
-- the lock of rq_stats_state, so two refreshes never book the same change twice. The very
-- first refresh of a database books history into the totals only, not into a bucket. Returns
-- the number of queues.
DROP FUNCTION IF EXISTS rq_stats_refresh(int, int, bool);
CREATE OR REPLACE FUNCTION rq_stats_refresh(p_bucket_seconds int, p_keep_seconds int, p_full bool DEFAULT true,
                                            p_write_horizon timestamptz DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_now       timestamptz;
    v_bucket    timestamptz;
    v_dlq_from  timestamptz;
    v_dlq_until timestamptz;
    v_first     bool;
    v_full      bool;
    v_full_at   timestamptz;
    v_n         int;
    v_written_since timestamptz;
BEGIN
    -- One snapshot for everything below (see the top of this file). A READ COMMITTED caller
    -- would get a snapshot per statement, and gauges that drift from the counters.
    IF current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'rq_stats_refresh must run in a REPEATABLE READ transaction';
    END IF;
    -- Callers take this lock before their transaction's snapshot (engine/stats.py: LOCK TABLE
    -- takes none), so it is taken after the previous refresh committed. A caller that did not
    -- may hold a snapshot older than a refresh that committed while it waited: locking the
    -- state row then raises a serialization failure (retry with a fresh snapshot) instead of
    -- booking that refresh's changes a second time; two first refreshes meet at the final insert.
    LOCK TABLE rq_stats_state IN EXCLUSIVE MODE;
    SELECT s.dlq_until, s.full_at,
           coalesce(s.write_horizon, s.refreshed_at - interval '30 seconds') - interval '1 second'
    INTO v_dlq_from, v_full_at, v_written_since
    FROM rq_stats_state s WHERE s.id = 1 FOR UPDATE;
    v_first := NOT FOUND;
    v_full := p_full OR v_full_at IS NULL;  -- an incremental refresh adjusts what a full pass left
    v_now := clock_timestamp();
    v_bucket := to_timestamp(floor(extract(epoch FROM v_now) / p_bucket_seconds) * p_bucket_seconds);
    -- Dead letters are counted by failed_at a little behind now: an ack transaction stamped
    -- before this instant but not committed yet is counted by the next refresh.
    v_dlq_until := v_now - interval '2 seconds';
    IF v_dlq_from IS NOT NULL AND v_dlq_until < v_dlq_from THEN
        v_dlq_until := v_dlq_from;
    END IF;

    -- Per queue: counter deltas and the partitions seen for the first time; per reader (queue,
    -- consumer group): how far its read position advanced, which an incremental refresh takes off
    -- the depth and the backlogs; and the cursors that may have moved since the last refresh.
    CREATE TEMP TABLE IF NOT EXISTS rq_stats_delta (
        queue_id bigint, pushed bigint, popped bigint, acked bigint, failed bigint, dead bigint, partitions bigint
    ) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS rq_stats_advanced (
        queue_id bigint, consumer_group text, advance bigint
    ) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS rq_stats_moved (
        partition_id uuid, consumer_group text, committed bigint, last_delivered bigint, retry_count int
    ) ON COMMIT DROP;

    -- pushed: last_offset advances, read and remembered in one statement. Only partitions
    -- written since the previous refresh can have advanced: last_write_at (which lags a write
    -- by at most a second) finds them through its index, so a refresh does not read a million
    -- idle partitions; the previous refresh's write horizon covers pushes committed late.
    WITH snap AS MATERIALIZED (
        SELECT p.id, p.queue_id, p.last_offset, s.last_offset AS prev
        FROM rq_queues q
        JOIN rq_partitions p ON p.queue_id = q.id
        LEFT JOIN rq_stats_partitions s ON s.partition_id = p.id
        WHERE s.last_offset IS DISTINCT FROM p.last_offset
          AND (v_written_since IS NULL OR p.last_write_at >= v_written_since)
    ), remembered AS (
        INSERT INTO rq_stats_partitions AS s (partition_id, last_offset)
        SELECT id, last_offset FROM snap
        ON CONFLICT (partition_id) DO UPDATE SET last_offset = EXCLUDED.last_offset
    )
    INSERT INTO rq_stats_delta (queue_id, pushed, partitions)
    SELECT queue_id, sum(greatest(last_offset - coalesce(prev, -1), 0)), count(*) FILTER (WHERE prev IS NULL)
    FROM snap GROUP BY queue_id;

    -- popped / acked / failed: cursor movements. The cursors that may have moved: every cursor
    -- that differs from its snapshot (full pass), or every cursor in rq_stats_touched
    -- (incremental: the rows this snapshot sees, once per cursor).
    -- Two statements, not one with a condition in it: a plan shared by both modes would read
    -- every cursor in an incremental refresh too.
    IF v_full THEN
        INSERT INTO rq_stats_moved
        SELECT c.partition_id, c.consumer_group, c.committed, c.last_delivered, c.retry_count
        FROM rq_consumers c
        LEFT JOIN rq_stats_cursors s ON s.partition_id = c.partition_id AND s.consumer_group = c.consumer_group
        WHERE s.partition_id IS NULL OR s.committed <> c.committed OR s.last_delivered <> c.last_delivered
              OR s.retry_count <> c.retry_count;
    ELSE
        -- One index probe per touched cursor. As a plain join the planner hashed every cursor
        -- of the database instead (100,000 read for 6,600 touched, at 100,000 partitions), and
        -- a subquery with OFFSET 0 is never flattened into one.
        INSERT INTO rq_stats_moved
        SELECT t.partition_id, t.consumer_group, c.committed, c.last_delivered, c.retry_count
        FROM (SELECT DISTINCT t.partition_id, t.consumer_group FROM rq_stats_touched t) t
        CROSS JOIN LATERAL (SELECT c.committed, c.last_delivered, c.retry_count FROM rq_consumers c
                            WHERE c.partition_id = t.partition_id AND c.consumer_group = t.consumer_group
                            OFFSET 0) c;
    END IF;
    -- A cursor seen for the first time counts from the start of the log when it read from there
    -- (queue mode, subscription "all"). Index probes per moved cursor, as above: hash joins here
    -- read every partition and every cursor snapshot for a few thousand moved cursors.
    WITH snap AS MATERIALIZED (
        SELECT m.partition_id, m.consumer_group, p.queue_id, m.committed, m.last_delivered, m.retry_count,
               s.committed AS prev_committed, s.last_delivered AS prev_delivered, s.retry_count AS prev_retry,
               (m.consumer_group = '__QUEUE_MODE__' OR coalesce(g.subscription_mode, 'all') = 'all') AS from_start,
               p.log_start, g.subscription_from
        FROM rq_stats_moved m
        CROSS JOIN LATERAL (SELECT p.queue_id, p.log_start FROM rq_partitions p WHERE p.id = m.partition_id
                            OFFSET 0) p
        LEFT JOIN LATERAL (SELECT s.partition_id, s.committed, s.last_delivered, s.retry_count
                           FROM rq_stats_cursors s
                           WHERE s.partition_id = m.partition_id AND s.consumer_group = m.consumer_group
                           OFFSET 0) s ON true
        LEFT JOIN rq_consumer_groups g ON g.queue_id = p.queue_id AND g.name = m.consumer_group
        WHERE s.partition_id IS NULL OR s.committed <> m.committed OR s.last_delivered <> m.last_delivered
              OR s.retry_count <> m.retry_count
    ), remembered AS (
        INSERT INTO rq_stats_cursors AS s (partition_id, consumer_group, committed, last_delivered, retry_count)
        SELECT partition_id, consumer_group, committed, last_delivered, retry_count FROM snap
        ON CONFLICT (partition_id, consumer_group) DO UPDATE
            SET committed = EXCLUDED.committed, last_delivered = EXCLUDED.last_delivered,
                retry_count = EXCLUDED.retry_count
    ), advanced AS (
        -- the read position as the gauges count it: the committed offset, or for a cursor not
        -- seen before where the gauges counted it from (the start of the log, or the group's
        -- subscription); never before the log start
        INSERT INTO rq_stats_advanced (queue_id, consumer_group, advance)
        SELECT queue_id, consumer_group,
               sum(greatest(committed, log_start - 1)
                   - greatest(coalesce(prev_committed,
                                       CASE WHEN consumer_group = '__QUEUE_MODE__' THEN log_start - 1
                                            ELSE rq_seed_cursor(partition_id, log_start, subscription_from) END),
                              log_start - 1))
        FROM snap
        WHERE NOT v_full
        GROUP BY queue_id, consumer_group
    )
    INSERT INTO rq_stats_delta (queue_id, popped, acked, failed)
    SELECT queue_id,
           sum(CASE WHEN prev_delivered IS NOT NULL THEN greatest(last_delivered - prev_delivered, 0)
                    WHEN from_start THEN greatest(last_delivered - (log_start - 1), 0) ELSE 0 END),
           sum(CASE WHEN prev_committed IS NOT NULL THEN greatest(committed - prev_committed, 0)
                    WHEN from_start THEN greatest(committed - (log_start - 1), 0) ELSE 0 END),
           sum(CASE WHEN prev_retry IS NULL OR retry_count < prev_retry THEN retry_count
                    ELSE retry_count - prev_retry END)
    FROM snap GROUP BY queue_id;

    INSERT INTO rq_stats_delta (queue_id, dead)
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
            SELECT greatest(p.last_offset - greatest(coalesce(c.committed, rq_seed_cursor(p.id, p.log_start,
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
                     coalesce((SELECT sum(d.pushed) FROM rq_stats_delta d WHERE d.queue_id = g.queue_id), 0)
                     - coalesce((SELECT sum(a.advance) FROM rq_stats_advanced a
                                 WHERE a.queue_id = g.queue_id AND a.consumer_group = g.consumer_group), 0) AS n
              FROM rq_stats_groups g) m
        WHERE sg.queue_id = m.queue_id AND sg.consumer_group = m.consumer_group AND m.n <> 0;
    END IF;

    -- Gauges and counters per queue, then the bucket. A full pass counts the depth and the
    -- partitions over every partition; an incremental refresh carries the last values forward.
    WITH deltas AS (
        SELECT d.queue_id, coalesce(sum(d.pushed), 0) AS pushed, coalesce(sum(d.popped), 0) AS popped,
               coalesce(sum(d.acked), 0) AS acked, coalesce(sum(d.failed), 0) AS failed,
               coalesce(sum(d.dead), 0) AS dead, coalesce(sum(d.partitions), 0) AS partitions
        FROM rq_stats_delta d GROUP BY d.queue_id
    ), gauges AS (
        SELECT q.id AS queue_id, coalesce(d.pushed, 0) AS pushed, coalesce(d.popped, 0) AS popped,
               coalesce(d.acked, 0) AS acked, coalesce(d.failed, 0) AS failed, coalesce(d.dead, 0) AS dead,
               CASE WHEN v_full THEN
                        coalesce((SELECT sum(greatest(p.last_offset - greatest(coalesce(c.committed, p.log_start - 1),
                                                                               p.log_start - 1), 0))
                                  FROM rq_partitions p
                                  LEFT JOIN rq_consumers c ON c.partition_id = p.id
                                                          AND c.consumer_group = '__QUEUE_MODE__'
                                  WHERE p.queue_id = q.id), 0)
                    ELSE greatest(coalesce(t.depth, 0) + coalesce(d.pushed, 0)
                                  - coalesce((SELECT a.advance FROM rq_stats_advanced a
                                              WHERE a.queue_id = q.id AND a.consumer_group = '__QUEUE_MODE__'), 0),
                                  0)
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
        WHERE NOT v_first AND (j.moved OR j.pushed + j.popped + j.acked + j.failed + j.dead > 0)
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

    -- The touched rows this snapshot sees were read (an incremental refresh reads them all; a full
    -- pass reads every cursor); rows committed since stay for the next refresh.
    DELETE FROM rq_stats_touched;
    -- Forget what belongs to deleted queues, partitions and cursors, and old buckets. The
    -- snapshots are read in full for that, so only in a full pass and about every five minutes:
    -- a leftover row until then costs nothing but its bytes.
    DELETE FROM rq_stats_totals t WHERE NOT EXISTS (SELECT 1 FROM rq_queues q WHERE q.id = t.queue_id);
    IF v_full AND (v_full_at IS NULL
                   OR floor(extract(epoch FROM v_now) / 300) <> floor(extract(epoch FROM v_full_at) / 300)) THEN
        DELETE FROM rq_stats_partitions s
        WHERE NOT EXISTS (SELECT 1 FROM rq_partitions p WHERE p.id = s.partition_id);
        DELETE FROM rq_stats_cursors s WHERE NOT EXISTS (
            SELECT 1 FROM rq_consumers c WHERE c.partition_id = s.partition_id AND c.consumer_group = s.consumer_group);
    END IF;
    DELETE FROM rq_stats s WHERE s.bucket < v_now - make_interval(secs => p_keep_seconds);

    INSERT INTO rq_stats_state AS s (id, dlq_until, refreshed_at, full_at, full_seconds, write_horizon)
    VALUES (1, v_dlq_until, v_now, v_now, extract(epoch FROM clock_timestamp() - v_now),
            p_write_horizon)
    ON CONFLICT (id) DO UPDATE
        SET dlq_until = EXCLUDED.dlq_until, refreshed_at = EXCLUDED.refreshed_at,
            write_horizon = EXCLUDED.write_horizon,
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
-- partition created, until autovacuum's first ANALYZE (ten seconds and more) replaces them.
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
