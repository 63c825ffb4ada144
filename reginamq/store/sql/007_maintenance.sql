-- Background work, run by one elected broker process at a time: retention (what each queue's
-- retention_seconds, max_wait_seconds and completed_retention_seconds delete,
-- 001_queues_and_partitions.sql), the idle-partition cleanup and the deduplication purge.

-- What retention deleted, per queue and per retention worker (a row per worker, so parallel
-- workers never wait on each other's counter): segments, messages, the messages among them
-- that some reader had not consumed (evicted by retentionSeconds or maxWaitTimeSeconds), and
-- idle partitions deleted. Summed over workers for /metrics.
CREATE TABLE IF NOT EXISTS rq_retention_totals (
    queue_id    bigint NOT NULL,
    worker      int NOT NULL,
    segments    bigint NOT NULL DEFAULT 0,
    messages    bigint NOT NULL DEFAULT 0,
    evicted     bigint NOT NULL DEFAULT 0,
    partitions  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, worker)
);

-- Which broker process runs each background loop, until when (rq_take_leader_lease).
CREATE TABLE IF NOT EXISTS rq_leader_leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    expires_at  timestamptz NOT NULL
);

-- Take or keep the named lease: granted when free, expired, or already ours.
CREATE OR REPLACE FUNCTION rq_take_leader_lease(p_name text, p_holder text, p_seconds int)
RETURNS bool LANGUAGE sql AS $$
    WITH taken AS (
        INSERT INTO rq_leader_leases AS l (name, holder, expires_at)
        VALUES (p_name, p_holder, now() + make_interval(secs => p_seconds))
        ON CONFLICT (name) DO UPDATE
            SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
            WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM taken)
$$;

-- Give the named lease back if p_holder holds it, so that another process takes the loop at its
-- next tick instead of after the lease runs out; true when it was held.
CREATE OR REPLACE FUNCTION rq_release_leader_lease(p_name text, p_holder text)
RETURNS bool LANGUAGE sql AS $$
    WITH released AS (
        DELETE FROM rq_leader_leases WHERE name = p_name AND holder = p_holder RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released)
$$;

-- Whether retention deletes a segment created at p_created and ending at p_end, of a queue
-- keeping messages p_retention seconds (retentionSeconds with retentionEnabled; 0 = none),
-- p_max_wait seconds (maxWaitTimeSeconds; 0 = none) and consumed ones p_completed seconds:
-- older than the first two (consumed or not), or consumed by every reader (p_end <= p_done;
-- NULL = some reader read nothing) and older than the third. Each rule holds for a prefix of
-- a partition (created_at is monotone per partition), so retention deletes prefixes.
CREATE OR REPLACE FUNCTION rq_segment_goes(p_created timestamptz, p_end bigint, p_retention int, p_max_wait int,
                                           p_completed int, p_done bigint) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_created < now() - make_interval(secs => least(nullif(p_retention, 0), nullif(p_max_wait, 0)))
                    OR (p_completed > 0 AND p_end <= p_done
                        AND p_created < now() - make_interval(secs => p_completed)), false)
$$;

-- Everything <= done is consumed by every reader of the partition (NULL: some reader read
-- nothing): every cursor of the partition, and no named group of its queue (p_groups of them)
-- that has no cursor there yet (it would still read the partition from its start). The caller
-- counts the queue's groups, once per queue rather than once per partition. A one-row table,
-- so that PostgreSQL inlines it into the caller's plan (a scalar SQL function with an aggregate
-- is called row by row).
CREATE OR REPLACE FUNCTION rq_cursors_done(p_partition uuid, p_groups bigint) RETURNS TABLE (done bigint)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN count(*) = 0
                  OR count(*) FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__') < p_groups
                THEN NULL ELSE min(c.committed) END
    FROM rq_consumers c WHERE c.partition_id = p_partition
$$;

-- The retention periods in use (seconds, distinct, ascending): the due walk keeps a position
-- per period.
CREATE OR REPLACE FUNCTION rq_retention_periods() RETURNS int[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT d.seconds ORDER BY d.seconds), '{}')
    FROM rq_queues q
    CROSS JOIN LATERAL unnest(ARRAY[q.retention_seconds, q.max_wait_seconds, q.completed_retention_seconds]) AS d(seconds)
    WHERE d.seconds > 0
$$;

-- Delete prefixes: of partition p_pid[i] (of queue p_qid[i], whose readers are done up to
-- p_done[i]) every segment up to offset p_upto[i] (a segment end), and count it in the worker's
-- totals. Where that evicted messages some reader had not consumed, log_start moves past them
-- (never backwards) and leases whose whole span went are released. A prefix every reader had
-- consumed leaves the partition row alone: no cursor is behind it, and those that need the
-- first stored offset find it (rq_first_offset). With many partitions each deletion is in a
-- partition of its own, and a row lock and a log_start update for each would be most of what
-- retention costs. Returns what went, and when the oldest segment that went was created.
CREATE OR REPLACE FUNCTION rq_retention_delete(p_pid uuid[], p_qid bigint[], p_upto bigint[], p_done bigint[],
                                               p_worker int)
RETURNS TABLE (segments int, messages bigint, evicted bigint, oldest timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_qid     bigint[];
    v_count   int[];
    v_msgs    bigint[];
    v_lost    bigint[];
    v_oldest  timestamptz;
    -- the partitions where messages were evicted, and the end of each one's deleted prefix
    v_evicted_pid   uuid[];
    v_evicted_upto  bigint[];
BEGIN
    -- Segments are deleted without the partition lock: a push only adds segments past the
    -- partition's end, and a pop reads them in its snapshot. The due walks and the sweep run
    -- one after the other and the sweep's workers over disjoint ranges, so no two retention
    -- deletions meet.
    WITH gone AS (
        DELETE FROM rq_segments s USING unnest(p_pid, p_qid, p_upto, p_done) AS d(pid, qid, upto, done)
        WHERE s.partition_id = d.pid AND s.base_offset <= d.upto
        RETURNING s.partition_id, d.qid, s.base_offset, s.end_offset, s.created_at, d.done
    )
    SELECT array_agg(w.qid), array_agg(w.n), array_agg(w.msgs), array_agg(w.lost), min(w.oldest),
           array_agg(w.pid) FILTER (WHERE w.lost > 0), array_agg(w.upto) FILTER (WHERE w.lost > 0)
    INTO v_qid, v_count, v_msgs, v_lost, v_oldest, v_evicted_pid, v_evicted_upto
    FROM (SELECT g.partition_id AS pid, g.qid, max(g.end_offset) AS upto, count(*)::int AS n,
                 sum(g.end_offset - g.base_offset + 1)::bigint AS msgs,
                 -- messages some reader had not consumed: evicted
                 sum(greatest(g.end_offset - greatest(g.base_offset - 1, coalesce(g.done, -1)), 0))::bigint AS lost,
                 min(g.created_at) AS oldest
          FROM gone g GROUP BY g.partition_id, g.qid) w;
    IF v_qid IS NULL THEN
        RETURN QUERY SELECT 0, 0::bigint, 0::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    IF v_evicted_pid IS NOT NULL THEN
        -- The partitions locked in the pushes' order (ids ascending), so no cycle with them.
        PERFORM 1 FROM rq_partitions p WHERE p.id = ANY (v_evicted_pid) ORDER BY p.id FOR UPDATE;
        UPDATE rq_partitions p SET log_start = greatest(p.log_start, d.upto + 1)
        FROM unnest(v_evicted_pid, v_evicted_upto) AS d(pid, upto)
        WHERE p.id = d.pid;
        -- A lease whose whole span was evicted covers nothing any more: release it, so the
        -- group reads on at once instead of waiting for the lease to expire. Cursors are
        -- never waited for (SKIP LOCKED: an ack holding one may be about to lock partitions);
        -- a skipped lease just expires. The cursor stays where it was: nothing was consumed.
        UPDATE rq_consumers c
        SET span_start = NULL, span_end = NULL, lease_id = NULL, lease_expires_at = NULL,
            acked_count = 0, stop_at = NULL, retry_charged = false
        WHERE c.ctid IN (
            SELECT c2.ctid FROM rq_consumers c2 JOIN unnest(v_evicted_pid, v_evicted_upto) AS d(pid, upto)
                                                ON c2.partition_id = d.pid
            WHERE c2.span_end <= d.upto
            FOR UPDATE OF c2 SKIP LOCKED);
    END IF;
    INSERT INTO rq_retention_totals AS t (queue_id, worker, segments, messages, evicted)
    SELECT d.qid, p_worker, sum(d.n), sum(d.msgs), sum(d.lost)
    FROM unnest(v_qid, v_count, v_msgs, v_lost) AS d(qid, n, msgs, lost)
    GROUP BY d.qid
    ON CONFLICT (queue_id, worker) DO UPDATE
        SET segments = t.segments + EXCLUDED.segments, messages = t.messages + EXCLUDED.messages,
            evicted = t.evicted + EXCLUDED.evicted;
    RETURN QUERY SELECT (SELECT sum(c) FROM unnest(v_count) c)::int, (SELECT sum(m) FROM unnest(v_msgs) m)::bigint,
                        (SELECT sum(l) FROM unnest(v_lost) l)::bigint, v_oldest;
END;
$$;

-- One step of the due walk for the retention period p_seconds: the next p_window segments,
-- in creation order from the position (p_at, p_partition, p_base) on, that were created more
-- than p_seconds ago (the rq_segments_due index). Each one that goes for its own queue takes
-- its partition's prefix up to it (older segments go by the same rule). Returns how many
-- candidates it looked at (fewer than p_window: the walk has caught up) and the last one,
-- where the next step starts. A candidate that stays (unconsumed, or its queue keeps longer)
-- is passed: the walk of another period or the sweep (rq_retention_step) deletes it later.
-- So the work is the data that falls due, not the partitions holding data.
CREATE OR REPLACE FUNCTION rq_retention_due_step(
    p_seconds int, p_at timestamptz, p_partition uuid, p_base bigint, p_window int, p_worker int
) RETURNS TABLE (segments int, messages bigint, evicted bigint, candidates int,
                 next_at timestamptz, next_partition uuid, next_base bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_candidates int;
    v_next_at    timestamptz;
    v_next_pid   uuid;
    v_next_base  bigint;
    v_pid        uuid[];
    v_qid        bigint[];
    v_upto       bigint[];
    v_done       bigint[];
BEGIN
    WITH due AS MATERIALIZED (
        SELECT s.partition_id, s.base_offset, s.end_offset, s.created_at FROM rq_segments s
        WHERE (s.created_at, s.partition_id, s.base_offset) > (p_at, p_partition, p_base)
          AND s.created_at < now() - make_interval(secs => p_seconds)
        ORDER BY s.created_at, s.partition_id, s.base_offset LIMIT p_window
    ), last AS (
        SELECT d.created_at, d.partition_id, d.base_offset FROM due d
        ORDER BY d.created_at DESC, d.partition_id DESC, d.base_offset DESC LIMIT 1
    ), owners AS MATERIALIZED (
        -- once per partition of the window (a partition written by several pushes holds several
        -- of its segments): its queue, by an index probe (OFFSET 0 keeps it a nested loop, where
        -- the planner, misjudging the walk's rows, would hash the whole partition table).
        -- MATERIALIZED: inlined into `going`, the probes would run once per segment of the window.
        SELECT d.partition_id, p.queue_id
        FROM (SELECT DISTINCT d.partition_id FROM due d) d
        CROSS JOIN LATERAL (SELECT p.queue_id FROM rq_partitions p WHERE p.id = d.partition_id OFFSET 0) p
    ), queues AS MATERIALIZED (
        -- once per queue: its periods and how many named groups read it (a window commonly holds
        -- one segment of each of thousands of partitions, mostly of one queue)
        SELECT q.id, q.retention_seconds, q.max_wait_seconds, q.completed_retention_seconds,
               (SELECT count(*) FROM rq_consumer_groups g WHERE g.queue_id = q.id) AS groups
        FROM rq_queues q WHERE q.id IN (SELECT o.queue_id FROM owners o)
    ), readers AS MATERIALIZED (
        -- how far each partition's readers are done: its cursors, by an index probe
        SELECT o.partition_id, o.queue_id, q.retention_seconds, q.max_wait_seconds, q.completed_retention_seconds,
               r.done
        FROM owners o
        JOIN queues q ON q.id = o.queue_id
        CROSS JOIN LATERAL rq_cursors_done(o.partition_id, q.groups) r
    ), going AS (
        SELECT d.partition_id, r.queue_id, max(d.end_offset) AS upto, r.done
        FROM due d
        JOIN readers r ON r.partition_id = d.partition_id
        WHERE rq_segment_goes(d.created_at, d.end_offset, r.retention_seconds, r.max_wait_seconds,
                              r.completed_retention_seconds, r.done)
        GROUP BY d.partition_id, r.queue_id, r.done
    )
    SELECT (SELECT count(*) FROM due), l.created_at, l.partition_id, l.base_offset, g.pids, g.qids, g.uptos, g.dones
    INTO v_candidates, v_next_at, v_next_pid, v_next_base, v_pid, v_qid, v_upto, v_done
    FROM (SELECT array_agg(g.partition_id ORDER BY g.partition_id) AS pids,
                 array_agg(g.queue_id ORDER BY g.partition_id) AS qids,
                 array_agg(g.upto ORDER BY g.partition_id) AS uptos,
                 array_agg(g.done ORDER BY g.partition_id) AS dones
          FROM going g) g
    LEFT JOIN last l ON true;

    RETURN QUERY SELECT r.segments, r.messages, r.evicted, v_candidates,
                        coalesce(v_next_at, p_at), coalesce(v_next_pid, p_partition), coalesce(v_next_base, p_base)
                 FROM rq_retention_delete(v_pid, v_qid, v_upto, v_done, p_worker) r;
END;
$$;

-- One bounded step of one sweep worker. The due walks (rq_retention_due_step) delete what
-- falls due; the sweep deletes what they passed and what fell due later: segments whose
-- readers caught up after their time, and segments committed after a walk had passed their
-- creation time. A worker owns the partitions whose id lies in [p_from's range start,
-- p_upper) (ids are random, so N contiguous ranges split the work evenly and never overlap);
-- a step looks at the next p_window partitions of its range that hold segments, from p_from
-- on, and returns where the next step starts (NULL: the range is done, start over) and how
-- overdue the oldest segment it deleted was (the loop paces light steps only while that
-- stays under a walk period). It leaves alone the partitions whose oldest segment fell due
-- less than p_grace seconds ago: the walks delete those within a round or two, and a sweep that
-- took them would meet every partition fallen due since the last walk, doing the walks' work
-- twice over. Partitions without segments are never visited:
-- they are found by skipping through the segments' primary key (one index probe per partition
-- that holds data), so a sweep costs what the retained data costs, not what the partition
-- count costs.
-- Segments go oldest first per partition, at most p_limit per step; the scan of a partition
-- stops at the first segment that stays.
CREATE OR REPLACE FUNCTION rq_retention_step(
    p_from uuid, p_upper uuid, p_window int, p_limit int, p_worker int, p_grace float8
) RETURNS TABLE (segments int, messages bigint, evicted bigint, next_from uuid, overdue float8)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids       uuid[];
    v_oldest    timestamptz[];
    v_cut       timestamptz;
    v_next      uuid;
    v_part      record;
    v_seg       record;
    v_left      int := p_limit;
    v_end       bigint;
    -- per partition with segments to delete
    v_pid       uuid[] := '{}';
    v_qid       bigint[] := '{}';
    v_upto      bigint[] := '{}';
    v_done      bigint[] := '{}';
BEGIN
    -- The partitions holding segments, each with its oldest segment's age, read where the
    -- skip lands anyway (the first entry of a partition in the primary key is its oldest).
    WITH RECURSIVE holders (id, created_at, n) AS (
        (SELECT s.partition_id, s.created_at, 1 FROM rq_segments s
         WHERE s.partition_id >= p_from AND (p_upper IS NULL OR s.partition_id < p_upper)
         ORDER BY s.partition_id, s.base_offset LIMIT 1)
        UNION ALL
        SELECT f.partition_id, f.created_at, h.n + 1
        FROM holders h
        CROSS JOIN LATERAL (SELECT s.partition_id, s.created_at FROM rq_segments s
                            WHERE s.partition_id > h.id AND (p_upper IS NULL OR s.partition_id < p_upper)
                            ORDER BY s.partition_id, s.base_offset LIMIT 1) f
        WHERE h.n <= p_window
    )
    SELECT array_agg(h.id ORDER BY h.id), array_agg(h.created_at ORDER BY h.id) INTO v_ids, v_oldest
    FROM holders h;
    IF cardinality(v_ids) > p_window THEN
        v_next := v_ids[p_window + 1];
        v_ids := v_ids[1:p_window];
    END IF;
    -- A partition whose oldest segment is younger than the shortest retention period has
    -- nothing to delete (most partitions holding data hold only young data), and one that fell
    -- due within the grace is the walks': their rows and readers are not looked at.
    v_cut := now() - make_interval(secs => (SELECT (rq_retention_periods())[1]) + p_grace);
    v_ids := ARRAY(SELECT t.id FROM unnest(v_ids, v_oldest[1:cardinality(v_ids)]) AS t(id, created_at)
                   WHERE t.created_at < v_cut ORDER BY t.id);

    -- Only partitions whose oldest segment goes are visited segment by segment; the others
    -- cost one row of this statement.
    FOR v_part IN
        SELECT x.* FROM (
            SELECT p.id, p.queue_id, q.retention_seconds, q.max_wait_seconds, q.completed_retention_seconds,
                   r.done, f.end_offset, f.created_at
            FROM rq_partitions p
            JOIN rq_queues q ON q.id = p.queue_id
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM rq_consumer_groups g WHERE g.queue_id = q.id) g
            CROSS JOIN LATERAL rq_cursors_done(p.id, g.n) r
            CROSS JOIN LATERAL (SELECT s.end_offset, s.created_at FROM rq_segments s
                                WHERE s.partition_id = p.id ORDER BY s.base_offset LIMIT 1) f
            WHERE p.id = ANY (v_ids) AND p.last_offset >= p.log_start
        ) x
        WHERE rq_segment_goes(x.created_at, x.end_offset, x.retention_seconds, x.max_wait_seconds,
                              x.completed_retention_seconds, x.done)
        ORDER BY x.id
    LOOP
        v_end := NULL;
        FOR v_seg IN
            SELECT s.end_offset, s.created_at FROM rq_segments s
            WHERE s.partition_id = v_part.id ORDER BY s.base_offset LIMIT v_left
        LOOP
            EXIT WHEN NOT rq_segment_goes(v_seg.created_at, v_seg.end_offset, v_part.retention_seconds,
                                          v_part.max_wait_seconds, v_part.completed_retention_seconds, v_part.done);
            v_end := v_seg.end_offset;
            v_left := v_left - 1;
        END LOOP;
        CONTINUE WHEN v_end IS NULL;  -- its oldest segment went meanwhile
        v_pid := v_pid || v_part.id;
        v_qid := v_qid || v_part.queue_id;
        v_upto := v_upto || v_end;
        v_done := v_done || v_part.done;
        IF v_left <= 0 THEN
            v_next := v_part.id;  -- the step is full: the next one goes on from this partition
            EXIT;
        END IF;
    END LOOP;

    RETURN QUERY SELECT r.segments, r.messages, r.evicted, v_next,
                        -- seconds the oldest deleted segment outlived the shortest retention
                        -- period and the grace (0: nothing deleted): a sweep running late shows here
                        greatest(coalesce(extract(epoch FROM v_cut - r.oldest), 0), 0)::float8
                 FROM rq_retention_delete(v_pid, v_qid, v_upto, v_done, p_worker) r;
END;
$$;

-- One bounded step of the idle-partition cleanup, over the same id ranges as the retention
-- workers: of the next p_window partitions of the range from p_from on, those that are empty
-- (no segment), have no live lease, no live deduplication key and no dead letter, and were
-- not written for p_idle_seconds, are deleted with their cursors and deduplication rows.
-- Returns how many went and where the next step starts (NULL: the range is done). This walk
-- visits every partition, so the loop paces it (a step per worker and round): partitions go
-- idle over days, and a walk over every partition at full speed would take a core.
--
-- A partition a push holds is skipped (SKIP LOCKED); a push that resolved the partition
-- before the delete finds it gone when it locks and is retried whole, creating it afresh
-- (002_push.sql).
CREATE OR REPLACE FUNCTION rq_idle_partitions_step(
    p_from uuid, p_upper uuid, p_window int, p_idle_seconds float8, p_worker int
) RETURNS TABLE (partitions int, next_from uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids       uuid[];
    v_next      uuid;
    v_part      record;
    v_n         int;
    v_locked    int;
    v_idle_qid  bigint[] := '{}';
BEGIN
    SELECT array_agg(w.id ORDER BY w.id) INTO v_ids FROM (
        SELECT p.id FROM rq_partitions p
        WHERE p.id >= p_from AND (p_upper IS NULL OR p.id < p_upper)
        ORDER BY p.id LIMIT p_window + 1) w;
    IF cardinality(v_ids) > p_window THEN
        v_next := v_ids[p_window + 1];
        v_ids := v_ids[1:p_window];
    END IF;

    FOR v_part IN
        SELECT p.id, p.queue_id
        FROM rq_partitions p
        WHERE p.id BETWEEN v_ids[1] AND v_ids[cardinality(v_ids)]
          AND coalesce(p.last_write_at, p.created_at) < now() - make_interval(secs => p_idle_seconds)
          AND NOT EXISTS (SELECT 1 FROM rq_segments s WHERE s.partition_id = p.id)
          AND NOT EXISTS (SELECT 1 FROM rq_dedup d WHERE d.partition_id = p.id AND d.expires_at > now())
          AND NOT EXISTS (SELECT 1 FROM rq_dedup_runs r WHERE r.partition_id = p.id AND r.expires_at > now())
          AND NOT EXISTS (SELECT 1 FROM rq_dlq x WHERE x.queue_id = p.queue_id AND x.partition_id = p.id)
        ORDER BY p.id
        FOR UPDATE OF p SKIP LOCKED
    LOOP
        -- Cursors are locked without waiting (an ack holding one may go on to lock
        -- partitions: waiting here could close a cycle); a busy or leased one keeps the
        -- partition for a later step.
        SELECT count(*) INTO v_n FROM rq_consumers c WHERE c.partition_id = v_part.id;
        SELECT count(*) INTO v_locked FROM (
            SELECT 1 FROM rq_consumers c WHERE c.partition_id = v_part.id
              AND (c.span_end IS NULL OR c.lease_expires_at <= now())
            FOR UPDATE SKIP LOCKED) l;
        CONTINUE WHEN v_locked < v_n;
        DELETE FROM rq_consumers c WHERE c.partition_id = v_part.id;
        DELETE FROM rq_dedup d WHERE d.partition_id = v_part.id;
        DELETE FROM rq_dedup_runs r WHERE r.partition_id = v_part.id;
        DELETE FROM rq_stream_state t WHERE t.partition_id = v_part.id;  -- no partition will read it again
        DELETE FROM rq_partitions p WHERE p.id = v_part.id;
        v_idle_qid := v_idle_qid || v_part.queue_id;
    END LOOP;
    IF cardinality(v_idle_qid) > 0 THEN
        INSERT INTO rq_retention_totals AS t (queue_id, worker, partitions)
        SELECT d.qid, p_worker, count(*) FROM unnest(v_idle_qid) AS d(qid) GROUP BY d.qid
        ON CONFLICT (queue_id, worker) DO UPDATE SET partitions = t.partitions + EXCLUDED.partitions;
    END IF;
    RETURN QUERY SELECT cardinality(v_idle_qid), v_next;
END;
$$;

-- What retention deleted, per queue (summed over workers), for /metrics.
CREATE OR REPLACE FUNCTION rq_retention_totals_of()
RETURNS TABLE (queue_name text, segments bigint, messages bigint, evicted bigint, partitions bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.name, sum(t.segments)::bigint, sum(t.messages)::bigint, sum(t.evicted)::bigint,
           sum(t.partitions)::bigint
    FROM rq_retention_totals t JOIN rq_queues q ON q.id = t.queue_id
    GROUP BY q.name ORDER BY q.name
$$;

-- Forget the counters of deleted queues.
CREATE OR REPLACE FUNCTION rq_retention_totals_purge() RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_retention_totals t
        WHERE NOT EXISTS (SELECT 1 FROM rq_queues q WHERE q.id = t.queue_id)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

-- Forget deduplication keys whose window has passed: at most p_limit key rows and p_limit runs
-- per call, the oldest first; answers how many rows of both went (fewer than p_limit: none is
-- left). In expiry order, so the plan walks the expiry index (001_queues_and_partitions.sql)
-- even when much of the table has expired (a purge catching up): without the order, a planner
-- expecting half the rows to match would scan the table from its start, through the live keys
-- in the pages vacuum reused, for each step.
CREATE OR REPLACE FUNCTION rq_dedup_purge_step(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH rows_gone AS (
        DELETE FROM rq_dedup WHERE ctid IN (
            SELECT ctid FROM rq_dedup WHERE expires_at < now() ORDER BY expires_at LIMIT p_limit)
        RETURNING 1
    ), runs_gone AS (
        DELETE FROM rq_dedup_runs WHERE ctid IN (
            SELECT ctid FROM rq_dedup_runs WHERE expires_at < now() ORDER BY expires_at LIMIT p_limit)
        RETURNING 1
    )
    SELECT ((SELECT count(*) FROM rows_gone) + (SELECT count(*) FROM runs_gone))::int
$$;
