-- Background work, run by one elected broker process at a time.

-- Retention settings the SQL enforces, derived from the stored options. retentionSeconds
-- applies only with retentionEnabled; completedRetentionSeconds applies on its own (Queen's
-- soak configures just that key).
ALTER TABLE rq_queues ADD COLUMN IF NOT EXISTS retention_seconds int
    GENERATED ALWAYS AS (CASE WHEN (options->>'retentionEnabled')::bool
                              THEN (options->>'retentionSeconds')::int ELSE 0 END) STORED;
ALTER TABLE rq_queues ADD COLUMN IF NOT EXISTS completed_retention_seconds int
    GENERATED ALWAYS AS ((options->>'completedRetentionSeconds')::int) STORED;

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

-- Delete whole segments no reader needs any more, oldest first per partition, at most
-- p_limit per call, and move each partition's log_start past them (never backwards).
-- A segment goes when it is older than the queue's retentionSeconds (consumed or not), or
-- when every consumer has committed past it and it is older than completedRetentionSeconds.
-- "Every consumer": every cursor of the partition, and no named group of the queue that
-- has no cursor there yet (it would still read the partition from its start).
CREATE OR REPLACE FUNCTION rq_retention_step(p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_deleted int;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS rq_doomed (partition_id uuid, base_offset bigint, end_offset bigint)
        ON COMMIT DROP;

    INSERT INTO rq_doomed
    SELECT s.partition_id, s.base_offset, s.end_offset
    FROM rq_queues q
    JOIN rq_partitions p ON p.queue_id = q.id AND p.last_offset >= p.log_start
    CROSS JOIN LATERAL (
        SELECT min(c.committed) AS done,
               count(*) FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__') AS named_cursors
        FROM rq_consumers c WHERE c.partition_id = p.id
    ) cur
    JOIN rq_segments s ON s.partition_id = p.id
    WHERE (q.retention_seconds > 0 OR q.completed_retention_seconds > 0)
      AND (
        (q.retention_seconds > 0 AND s.created_at < now() - make_interval(secs => q.retention_seconds))
        OR (q.completed_retention_seconds > 0
            AND s.end_offset <= cur.done
            AND s.created_at < now() - make_interval(secs => q.completed_retention_seconds)
            AND cur.named_cursors >= (SELECT count(*) FROM rq_consumer_groups g WHERE g.queue_id = q.id))
      )
    ORDER BY s.partition_id, s.base_offset
    LIMIT p_limit;

    -- The same lock order as pushes (partition rows ascending), so no deadlock with them.
    PERFORM 1 FROM rq_partitions WHERE id IN (SELECT DISTINCT partition_id FROM rq_doomed)
    ORDER BY id FOR UPDATE;
    DELETE FROM rq_segments s USING rq_doomed d
    WHERE s.partition_id = d.partition_id AND s.base_offset = d.base_offset;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    UPDATE rq_partitions p SET log_start = greatest(p.log_start, d.upto + 1)
    FROM (SELECT partition_id, max(end_offset) AS upto FROM rq_doomed GROUP BY partition_id) d
    WHERE p.id = d.partition_id;
    RETURN v_deleted;
END;
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
