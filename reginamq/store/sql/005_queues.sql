-- Queue lifecycle: delete a queue and everything that hangs off it, in one transaction.
CREATE OR REPLACE FUNCTION rq_delete_queue(p_queue text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    v_queue_id bigint;
BEGIN
    SELECT id INTO v_queue_id FROM rq_queues WHERE name = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM rq_segments s USING rq_partitions p WHERE p.queue_id = v_queue_id AND s.partition_id = p.id;
    DELETE FROM rq_consumers c USING rq_partitions p WHERE p.queue_id = v_queue_id AND c.partition_id = p.id;
    DELETE FROM rq_dedup d USING rq_partitions p WHERE p.queue_id = v_queue_id AND d.partition_id = p.id;
    DELETE FROM rq_dedup_runs r USING rq_partitions p WHERE p.queue_id = v_queue_id AND r.partition_id = p.id;
    -- streaming queries' state of its partitions (015_streams.sql)
    DELETE FROM rq_stream_state t USING rq_partitions p WHERE p.queue_id = v_queue_id AND t.partition_id = p.id;
    DELETE FROM rq_partitions WHERE queue_id = v_queue_id;
    DELETE FROM rq_moved WHERE queue_id = v_queue_id;  -- names moved to other members (021_moves.sql)
    DELETE FROM rq_consumer_groups WHERE queue_id = v_queue_id;
    DELETE FROM rq_dlq WHERE queue_id = v_queue_id;
    DELETE FROM rq_queues WHERE id = v_queue_id;
    RETURN true;
END;
$$;
