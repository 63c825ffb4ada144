-- Streaming queries (queen-mq's Stream.run; engine/streams.py): a registered query, and its state
-- rows per (query, source partition, key). The client runs the operators; the broker keeps the
-- state and commits a cycle's state changes, sink pushes and source ack in one transaction.
CREATE TABLE IF NOT EXISTS rq_stream_queries (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL UNIQUE,
    source_queue  text NOT NULL,
    sink_queue    text,
    config_hash   text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS rq_stream_state (
    query_id      uuid NOT NULL REFERENCES rq_stream_queries (id) ON DELETE CASCADE,
    partition_id  uuid NOT NULL,
    key           text NOT NULL,
    value         jsonb NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);
-- How a deleted partition's state goes with it (a deleted queue, retention of idle partitions).
CREATE INDEX IF NOT EXISTS rq_stream_state_partition ON rq_stream_state (partition_id);

-- Register (or find) a query by name. The same config_hash finds it; another one is a conflict
-- unless p_reset, which wipes the query's state and takes the new hash. Concurrent registrations
-- of one name meet on its row lock. A query created gets p_id when given (the catalog's id of
-- it, over several member databases: store/sharded_streams.py).
CREATE OR REPLACE FUNCTION rq_stream_register(p_name text, p_source text, p_sink text, p_hash text, p_reset bool,
                                              p_id uuid DEFAULT NULL)
RETURNS TABLE (query_id uuid, fresh bool, did_reset bool, conflict bool)
LANGUAGE plpgsql AS $$
DECLARE
    v_row rq_stream_queries%ROWTYPE;
BEGIN
    INSERT INTO rq_stream_queries (id, name, source_queue, sink_queue, config_hash)
    VALUES (coalesce(p_id, gen_random_uuid()), p_name, p_source, p_sink, p_hash)
    ON CONFLICT (name) DO NOTHING
    RETURNING * INTO v_row;
    IF FOUND THEN
        RETURN QUERY SELECT v_row.id, true, false, false;
        RETURN;
    END IF;
    SELECT * INTO v_row FROM rq_stream_queries q WHERE q.name = p_name FOR UPDATE;
    IF v_row.config_hash <> p_hash AND NOT p_reset THEN
        RETURN QUERY SELECT v_row.id, false, false, true;
        RETURN;
    END IF;
    IF v_row.config_hash <> p_hash THEN
        DELETE FROM rq_stream_state s WHERE s.query_id = v_row.id;
    END IF;
    UPDATE rq_stream_queries q SET source_queue = p_source, sink_queue = p_sink, config_hash = p_hash,
                                   updated_at = now()
    WHERE q.id = v_row.id;
    RETURN QUERY SELECT v_row.id, false, v_row.config_hash <> p_hash, false;
END;
$$;

-- A partition's state rows of a query, by key order: all of them, or the named keys, or those
-- whose key starts with p_prefix, or (the idle flush) those whose window closed at or before
-- p_ripe (epoch ms in value.windowEnd); the filters combine.
CREATE OR REPLACE FUNCTION rq_stream_state_get(p_query uuid, p_partition uuid, p_keys text[], p_prefix text,
                                               p_ripe bigint)
RETURNS TABLE (key text, value text, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.key, s.value::text, s.updated_at
    FROM rq_stream_state s
    WHERE s.query_id = p_query AND s.partition_id = p_partition
      AND (cardinality(p_keys) = 0 OR s.key = ANY (p_keys))
      AND (p_prefix IS NULL OR starts_with(s.key, p_prefix))
      AND (p_ripe IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'
                              AND (s.value ->> 'windowEnd')::numeric <= p_ripe))
    ORDER BY s.key
$$;

-- A cycle's state changes, in order (an upsert then a delete of one key leaves no row), after
-- the lock that serialises the cycles and idle flushes of one (query, partition): a flush
-- reading and deleting a window while a cycle updates it would otherwise lose events.
-- Answers the source partition's queue name, or NULL (nothing applied) when the query or the
-- partition does not exist.
CREATE OR REPLACE FUNCTION rq_stream_state_apply(p_query uuid, p_partition uuid, p_deletes bool[], p_keys text[],
                                                 p_values text[])
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_queue text := (SELECT q.name FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id
                     WHERE p.id = p_partition);
BEGIN
    IF v_queue IS NULL OR NOT EXISTS (SELECT 1 FROM rq_stream_queries q WHERE q.id = p_query) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_query::text || ':' || p_partition::text, 0));
    FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
        IF p_deletes[i] THEN
            DELETE FROM rq_stream_state s
            WHERE s.query_id = p_query AND s.partition_id = p_partition AND s.key = p_keys[i];
        ELSE
            INSERT INTO rq_stream_state AS s (query_id, partition_id, key, value)
            VALUES (p_query, p_partition, p_keys[i], p_values[i]::jsonb)
            ON CONFLICT (query_id, partition_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
        END IF;
    END LOOP;
    RETURN v_queue;
END;
$$;
