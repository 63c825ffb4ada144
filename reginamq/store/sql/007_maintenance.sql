-- Background work, run by one elected broker process at a time.

-- Retention settings the SQL enforces, derived from the stored options. retentionSeconds
-- applies only with retentionEnabled; completedRetentionSeconds applies on its own (Queen's
-- soak configures just that key).
ALTER TABLE rq_queues ADD COLUMN IF NOT EXISTS retention_seconds int
    GENERATED ALWAYS AS (CASE WHEN (options->>'retentionEnabled')::bool
                              THEN (options->>'retentionSeconds')::int ELSE 0 END) STORED;
ALTER TABLE rq_queues ADD COLUMN IF NOT EXISTS completed_retention_seconds int
    GENERATED ALWAYS AS ((options->>'completedRetentionSeconds')::int) STORED;
-- maxWaitTimeSeconds (Queen's message age eviction): older messages are deleted for every
-- reader, consumed or not, leased or not, whether retentionEnabled is set or not.
ALTER TABLE rq_queues ADD COLUMN IF NOT EXISTS max_wait_seconds int
    GENERATED ALWAYS AS ((options->>'maxWaitTimeSeconds')::int) STORED;

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

-- Whether retention deletes a segment created at p_created and ending at p_end: older than
-- the age cut (retentionSeconds / maxWaitTimeSeconds; NULL = none), or consumed by every reader
-- (p_end <= p_done; NULL = some reader read nothing) and older than completedRetentionSeconds.
CREATE OR REPLACE FUNCTION rq_segment_goes(p_created timestamptz, p_end bigint, p_age_cut timestamptz,
                                           p_completed int, p_done bigint) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_created < p_age_cut
                    OR (p_completed > 0 AND p_end <= p_done
                        AND p_created < now() - make_interval(secs => p_completed)), false)
$$;

-- One bounded step of one retention worker. A worker owns the partitions whose id lies in
-- [p_from's range start, p_upper) (ids are random, so N contiguous ranges split the work
-- evenly and never overlap); a step looks at the next p_window partitions of its range that
-- hold segments, from p_from on, and returns where the next step starts (NULL: the range is
-- done, start over) and how overdue the oldest segment it deleted was (the loop paces light
-- steps only while that stays under a walk period). Partitions without segments are never
-- visited: they are found by skipping through the segments' primary key (one index probe per
-- partition that holds data), so a walk costs what the retained data costs, not what the
-- partition count costs (at a million partitions, visiting every partition each walk kept a
-- core of PostgreSQL busy).
--
-- Segments go oldest first per partition, at most p_limit per step, and log_start moves past
-- them (never backwards). A segment goes when it is older than the queue's retentionSeconds
-- (with retentionEnabled) or maxWaitTimeSeconds (consumed or not, leased or not), or when
-- every reader has committed past it and it is older than completedRetentionSeconds. "Every
-- reader": every cursor of the partition, and no named group of the queue that has no cursor
-- there yet (it would still read the partition from its start). Each rule holds for a prefix
-- of the partition (created_at is monotone per partition), so the scan stops at the first
-- segment that stays.
DROP FUNCTION IF EXISTS rq_retention_step(uuid, uuid, int, int, float8, int);
DROP FUNCTION IF EXISTS rq_retention_step(uuid, uuid, int, int, int);  -- before it reported overdue
CREATE OR REPLACE FUNCTION rq_retention_step(
    p_from uuid, p_upper uuid, p_window int, p_limit int, p_worker int
) RETURNS TABLE (segments int, messages bigint, evicted bigint, next_from uuid, overdue float8)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids       uuid[];
    v_oldest    timestamptz[];
    v_cut       timestamptz;
    v_oldest_gone timestamptz;  -- the oldest segment deleted: how late the walk runs
    v_next      uuid;
    v_part      record;
    v_seg       record;
    v_left      int := p_limit;
    v_n         int;
    -- per segment to delete
    v_seg_pid   uuid[] := '{}';
    v_seg_base  bigint[] := '{}';
    -- per partition with segments to delete
    v_pid       uuid[] := '{}';
    v_qid       bigint[] := '{}';
    v_upto      bigint[] := '{}';
    v_count     int[] := '{}';
    v_msgs      bigint[] := '{}';
    v_lost      bigint[] := '{}';
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
    -- A partition whose oldest segment is younger than the shortest retention of any queue
    -- has nothing to delete: its row and readers are not looked at (most partitions holding
    -- data hold only young data).
    SELECT now() - make_interval(secs => min(least(nullif(q.retention_seconds, 0), nullif(q.max_wait_seconds, 0),
                                                   nullif(q.completed_retention_seconds, 0))))
    INTO v_cut FROM rq_queues q;
    v_ids := ARRAY(SELECT t.id FROM unnest(v_ids, v_oldest[1:cardinality(v_ids)]) AS t(id, created_at)
                   WHERE t.created_at < v_cut ORDER BY t.id);

    -- Only partitions whose oldest segment goes are visited segment by segment; the others
    -- cost one row of this statement. Whether the oldest segment is old enough for its own
    -- queue is asked before the readers are.
    FOR v_part IN
        SELECT x.* FROM (
            SELECT p.id, p.queue_id, q.completed_retention_seconds AS completed,
                   now() - make_interval(secs => least(nullif(q.retention_seconds, 0),
                                                       nullif(q.max_wait_seconds, 0))) AS age_cut,
                   -- everything <= done is consumed by every reader (NULL: a reader read nothing)
                   (SELECT CASE WHEN count(*) = 0
                                  OR count(*) FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__')
                                     < (SELECT count(*) FROM rq_consumer_groups g WHERE g.queue_id = q.id)
                                THEN NULL ELSE min(c.committed) END
                    FROM rq_consumers c WHERE c.partition_id = p.id) AS done,
                   f.end_offset, f.created_at
            FROM rq_partitions p
            JOIN rq_queues q ON q.id = p.queue_id
            CROSS JOIN LATERAL (SELECT s.end_offset, s.created_at FROM rq_segments s
                                WHERE s.partition_id = p.id ORDER BY s.base_offset LIMIT 1) f
            WHERE p.id = ANY (v_ids)
              AND p.last_offset >= p.log_start
              AND (q.retention_seconds > 0 OR q.completed_retention_seconds > 0 OR q.max_wait_seconds > 0)
              AND (f.created_at < now() - make_interval(secs => least(nullif(q.retention_seconds, 0),
                                                                      nullif(q.max_wait_seconds, 0)))
                   OR f.created_at < now() - make_interval(secs => nullif(q.completed_retention_seconds, 0)))
        ) x
        WHERE rq_segment_goes(x.created_at, x.end_offset, x.age_cut, x.completed, x.done)
        ORDER BY x.id
    LOOP
        v_n := 0;
        FOR v_seg IN
            SELECT s.base_offset, s.end_offset, s.created_at FROM rq_segments s
            WHERE s.partition_id = v_part.id ORDER BY s.base_offset LIMIT v_left
        LOOP
            EXIT WHEN NOT rq_segment_goes(v_seg.created_at, v_seg.end_offset, v_part.age_cut, v_part.completed,
                                          v_part.done);
            v_seg_pid := v_seg_pid || v_part.id;
            v_oldest_gone := least(v_oldest_gone, v_seg.created_at);
            v_seg_base := v_seg_base || v_seg.base_offset;
            IF v_n = 0 THEN
                v_pid := v_pid || v_part.id;
                v_qid := v_qid || v_part.queue_id;
                v_upto := v_upto || v_seg.end_offset;
                v_count := v_count || 1;
                v_msgs := v_msgs || (v_seg.end_offset - v_seg.base_offset + 1);
                v_lost := v_lost || 0::bigint;
            ELSE
                v_upto[cardinality(v_pid)] := v_seg.end_offset;
                v_count[cardinality(v_pid)] := v_n + 1;
                v_msgs[cardinality(v_pid)] := v_msgs[cardinality(v_pid)] + v_seg.end_offset - v_seg.base_offset + 1;
            END IF;
            v_lost[cardinality(v_pid)] := v_lost[cardinality(v_pid)]
                + greatest(v_seg.end_offset - greatest(v_seg.base_offset - 1, coalesce(v_part.done, -1)), 0);
            v_n := v_n + 1;
            v_left := v_left - 1;
        END LOOP;
        IF v_left <= 0 THEN
            v_next := v_part.id;  -- the step is full: the next one goes on from this partition
            EXIT;
        END IF;
    END LOOP;

    IF cardinality(v_pid) > 0 THEN
        -- The same lock order as pushes (partition rows ascending), so no deadlock with them.
        PERFORM 1 FROM rq_partitions WHERE id = ANY (v_pid) ORDER BY id FOR UPDATE;
        DELETE FROM rq_segments s USING unnest(v_seg_pid, v_seg_base) AS d(pid, base)
        WHERE s.partition_id = d.pid AND s.base_offset = d.base;
        UPDATE rq_partitions p SET log_start = greatest(p.log_start, d.upto + 1)
        FROM unnest(v_pid, v_upto) AS d(pid, upto)
        WHERE p.id = d.pid;
        -- A lease whose whole span was evicted covers nothing any more: release it, so the
        -- group reads on at once instead of waiting for the lease to expire. Cursors are
        -- never waited for (SKIP LOCKED: an ack holding one may be about to lock partitions);
        -- a skipped lease just expires. The cursor stays where it was: nothing was consumed.
        -- Only eviction can do that: what every reader consumed lies before every lease.
        IF EXISTS (SELECT 1 FROM unnest(v_lost) l WHERE l > 0) THEN
            UPDATE rq_consumers c
            SET span_start = NULL, span_end = NULL, lease_id = NULL, lease_expires_at = NULL,
                acked_count = 0, stop_at = NULL, retry_charged = false
            WHERE c.ctid IN (
                SELECT c2.ctid FROM rq_consumers c2 JOIN unnest(v_pid, v_upto) AS d(pid, upto)
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
    END IF;

    RETURN QUERY SELECT (SELECT coalesce(sum(c), 0) FROM unnest(v_count) c)::int,
                        (SELECT coalesce(sum(m), 0) FROM unnest(v_msgs) m)::bigint,
                        (SELECT coalesce(sum(l), 0) FROM unnest(v_lost) l)::bigint, v_next,
                        -- seconds the oldest deleted segment outlived the shortest retention of
                        -- any queue (0: nothing deleted): a walk running late shows here
                        greatest(coalesce(extract(epoch FROM v_cut - v_oldest_gone), 0), 0)::float8;
END;
$$;

-- One bounded step of the idle-partition cleanup, over the same id ranges as the retention
-- workers: of the next p_window partitions of the range from p_from on, those that are empty
-- (no segment), have no live lease, no live deduplication key and no dead letter, and were
-- not written for p_idle_seconds, are deleted with their cursors and deduplication rows.
-- Returns how many went and where the next step starts (NULL: the range is done). This walk
-- visits every partition, so the loop paces it (a step per worker and round): partitions go
-- idle over days, and a walk of a million partitions at full speed cost a core.
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
          AND p.last_offset < p.log_start
          AND coalesce(p.last_write_at, p.created_at) < now() - make_interval(secs => p_idle_seconds)
          AND NOT EXISTS (SELECT 1 FROM rq_segments s WHERE s.partition_id = p.id)
          AND NOT EXISTS (SELECT 1 FROM rq_dedup d WHERE d.partition_id = p.id AND d.expires_at > now())
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

-- Forget deduplication keys whose window has passed, at most p_limit per call.
CREATE OR REPLACE FUNCTION rq_dedup_purge_step(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_dedup WHERE ctid IN (
            SELECT ctid FROM rq_dedup WHERE expires_at < now() LIMIT p_limit)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
