-- Traces: events a consumer records about a message (msg.trace() in the client), found by the
-- message's address or by any of their names.

CREATE TABLE IF NOT EXISTS rq_traces (
    id              uuid PRIMARY KEY,          -- UUIDv7, minted by the broker: time ordered
    partition_id    uuid NOT NULL,
    transaction_id  text NOT NULL,
    consumer_group  text,
    event_type      text NOT NULL,
    data            jsonb NOT NULL,
    trace_names     text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS rq_traces_message ON rq_traces (partition_id, transaction_id, created_at);
-- The purge (rq_traces_purge_step) finds old traces through this index: a btree, as for the
-- deduplication keys (001_queues_and_partitions.sql), since a BRIN range stops narrowing once
-- vacuum hands the purged pages to new traces.
CREATE INDEX IF NOT EXISTS rq_traces_created_at ON rq_traces (created_at);

-- One row per (name, trace): lookups by name page through this index.
CREATE TABLE IF NOT EXISTS rq_trace_names (
    name        text NOT NULL,
    created_at  timestamptz NOT NULL,
    trace_id    uuid NOT NULL,
    PRIMARY KEY (name, created_at, trace_id)
);

CREATE OR REPLACE FUNCTION rq_trace_add(p_id uuid, p_partition uuid, p_txid text, p_group text, p_type text,
                                        p_data jsonb, p_names text[])
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    v_at timestamptz := clock_timestamp();
BEGIN
    INSERT INTO rq_traces (id, partition_id, transaction_id, consumer_group, event_type, data, trace_names, created_at)
    VALUES (p_id, p_partition, p_txid, p_group, p_type, p_data, coalesce(p_names, '{}'), v_at);
    INSERT INTO rq_trace_names (name, created_at, trace_id)
    SELECT DISTINCT n, v_at, p_id FROM unnest(p_names) n
    ON CONFLICT DO NOTHING;
    RETURN v_at;
END;
$$;

CREATE OR REPLACE FUNCTION rq_traces_for_message(p_partition uuid, p_txid text, p_limit int)
RETURNS TABLE (id uuid, partition_id uuid, transaction_id text, consumer_group text, event_type text,
               data text, trace_names text[], created_at timestamptz, queue_name text, partition_name text)
LANGUAGE sql STABLE AS $$
    SELECT t.id, t.partition_id, t.transaction_id, t.consumer_group, t.event_type, t.data::text,
           t.trace_names, t.created_at, q.name, p.name
    FROM rq_traces t
    LEFT JOIN rq_partitions p ON p.id = t.partition_id
    LEFT JOIN rq_queues q ON q.id = p.queue_id
    WHERE t.partition_id = p_partition AND t.transaction_id = p_txid
    ORDER BY t.created_at, t.id
    LIMIT p_limit
$$;

CREATE OR REPLACE FUNCTION rq_traces_by_name(p_name text, p_from timestamptz, p_to timestamptz,
                                             p_limit int, p_offset int)
RETURNS TABLE (id uuid, partition_id uuid, transaction_id text, consumer_group text, event_type text,
               data text, trace_names text[], created_at timestamptz, queue_name text, partition_name text,
               total bigint)
LANGUAGE sql STABLE AS $$
    WITH page AS (
        SELECT n.trace_id, n.created_at, count(*) OVER () AS total
        FROM rq_trace_names n
        WHERE n.name = p_name
          AND (p_from IS NULL OR n.created_at >= p_from)
          AND (p_to IS NULL OR n.created_at <= p_to)
        ORDER BY n.created_at DESC, n.trace_id DESC
        LIMIT p_limit OFFSET p_offset
    )
    SELECT t.id, t.partition_id, t.transaction_id, t.consumer_group, t.event_type, t.data::text,
           t.trace_names, t.created_at, q.name, p.name, pg.total
    FROM page pg
    JOIN rq_traces t ON t.id = pg.trace_id
    LEFT JOIN rq_partitions p ON p.id = t.partition_id
    LEFT JOIN rq_queues q ON q.id = p.queue_id
    ORDER BY pg.created_at DESC, pg.trace_id DESC
$$;

CREATE OR REPLACE FUNCTION rq_trace_names_page(p_search text, p_limit int, p_offset int)
RETURNS TABLE (name text, trace_count bigint, message_count bigint, last_seen timestamptz, total bigint)
LANGUAGE sql STABLE AS $$
    SELECT n.name, count(*), count(DISTINCT (t.partition_id, t.transaction_id)), max(n.created_at),
           count(*) OVER ()
    FROM rq_trace_names n
    JOIN rq_traces t ON t.id = n.trace_id
    WHERE p_search IS NULL OR strpos(lower(n.name), lower(p_search)) > 0
    GROUP BY n.name
    ORDER BY max(n.created_at) DESC, n.name
    LIMIT p_limit OFFSET p_offset
$$;

-- Forget traces older than p_before, at most p_limit per call, the oldest first (the order also
-- keeps the plan on the created_at index, as rq_dedup_purge_step's, 007_maintenance.sql).
CREATE OR REPLACE FUNCTION rq_traces_purge_step(p_before timestamptz, p_limit int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_n int;
BEGIN
    WITH gone AS (
        DELETE FROM rq_traces t WHERE t.id IN (
            SELECT t2.id FROM rq_traces t2 WHERE t2.created_at < p_before ORDER BY t2.created_at LIMIT p_limit)
        RETURNING t.id, t.created_at, t.trace_names
    ), names AS (
        DELETE FROM rq_trace_names n USING gone g, unnest(g.trace_names) AS nm(name)
        WHERE n.name = nm.name AND n.created_at = g.created_at AND n.trace_id = g.id
    )
    SELECT count(*) INTO v_n FROM gone;
    RETURN v_n;
END;
$$;
