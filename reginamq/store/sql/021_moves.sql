-- Moving idle partitions from one member database to another (`reginamq shards rebalance`,
-- store/moves.py; docs/shards.md, "Rebalancing"). A move runs in one two-phase transaction over
-- the partition's old home, its new home and the catalog: rq_move_out takes the partition's rows
-- out of the old home, rq_move_in writes them into the new one under an id the new home minted
-- (a partition's id tells its home), and the directory lists the new id.

-- On a member: the names of partitions that moved away from here, so that a broker that still
-- routes a name here (its cache is older than the move) is told so instead of creating the
-- partition a second time (rq_provision, 002_push.sql, raises RQ410). Brokers forget the names
-- moved since they last looked, every maintenance round (rq_moved_since). A name moved back
-- here is no longer listed.
CREATE TABLE IF NOT EXISTS rq_moved (
    queue_id   bigint NOT NULL,
    name       text NOT NULL,
    moved_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, name)
);
CREATE INDEX IF NOT EXISTS rq_moved_recent ON rq_moved (moved_at);

-- Whether a partition is idle enough to move: nothing written for p_idle_seconds, no live
-- lease, and nothing unconsumed by any reader that has a cursor on it (a partition that no
-- reader has a cursor on must hold no message).
CREATE OR REPLACE FUNCTION rq_partition_idle(p_id uuid, p_last_offset bigint, p_log_start bigint,
                                             p_last_write_at timestamptz, p_idle_seconds double precision)
RETURNS bool LANGUAGE sql STABLE AS $$
    SELECT (p_last_write_at IS NULL OR p_last_write_at < now() - make_interval(secs => p_idle_seconds))
       AND NOT EXISTS (SELECT 1 FROM rq_consumers c
                       WHERE c.partition_id = p_id
                         AND ((c.span_end IS NOT NULL AND c.lease_expires_at > now()) OR c.committed < p_last_offset))
       AND (p_last_offset < p_log_start OR EXISTS (SELECT 1 FROM rq_consumers c WHERE c.partition_id = p_id))
$$;

-- On a member: its idle partitions (of queue p_queue, or of every queue when NULL), in id
-- order after p_after, at most p_limit.
CREATE OR REPLACE FUNCTION rq_movable(p_after uuid, p_limit int, p_idle_seconds double precision, p_queue text)
RETURNS TABLE (id uuid, queue text, partition text)
LANGUAGE sql STABLE AS $$
    SELECT p.id, q.name, p.name
    FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id
    WHERE p.id > p_after AND (p_queue IS NULL OR q.name = p_queue)
      AND rq_partition_idle(p.id, p.last_offset, p.log_start, p.last_write_at, p_idle_seconds)
    ORDER BY p.id
    LIMIT p_limit
$$;

-- On the old home: takes the partitions of p_ids that are still idle out of this database, and
-- answers them with every row they own. A partition a push or the idle cleanup holds, or whose
-- cursor a pop or an ack holds, is skipped (never waited for: an ack holding a cursor may go on
-- to lock partitions). Each name taken out is listed in rq_moved.
CREATE OR REPLACE FUNCTION rq_move_out(p_ids uuid[], p_idle_seconds double precision)
RETURNS TABLE (partitions rq_partitions[], segments rq_segments[], dedup rq_dedup[], dedup_runs rq_dedup_runs[],
               consumers rq_consumers[], dead_letters rq_dlq[], deleted rq_deleted[], traces rq_traces[],
               trace_names rq_trace_names[], stream_state rq_stream_state[])
LANGUAGE plpgsql AS $$
DECLARE
    v_part record;
    v_ids uuid[] := '{}';
    v_n bigint;
    v_locked bigint;
BEGIN
    FOR v_part IN
        SELECT p.id FROM rq_partitions p
        WHERE p.id = ANY (p_ids)
          AND rq_partition_idle(p.id, p.last_offset, p.log_start, p.last_write_at, p_idle_seconds)
        ORDER BY p.id
        FOR UPDATE OF p SKIP LOCKED
    LOOP
        SELECT count(*) INTO v_n FROM rq_consumers c WHERE c.partition_id = v_part.id;
        SELECT count(*) INTO v_locked FROM (
            SELECT 1 FROM rq_consumers c WHERE c.partition_id = v_part.id FOR UPDATE SKIP LOCKED) l;
        CONTINUE WHEN v_locked < v_n;
        v_ids := v_ids || v_part.id;
    END LOOP;
    -- the partitions were locked, and their cursors, before idleness was read again here
    SELECT coalesce(array_agg(p.id), '{}') INTO v_ids FROM rq_partitions p
    WHERE p.id = ANY (v_ids) AND rq_partition_idle(p.id, p.last_offset, p.log_start, p.last_write_at, p_idle_seconds);

    RETURN QUERY SELECT
        (SELECT coalesce(array_agg(x), '{}') FROM rq_partitions x WHERE x.id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_segments x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_dedup x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_dedup_runs x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_consumers x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_dlq x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_deleted x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_traces x WHERE x.partition_id = ANY (v_ids)),
        (SELECT coalesce(array_agg(n), '{}') FROM rq_trace_names n
         WHERE n.trace_id IN (SELECT t.id FROM rq_traces t WHERE t.partition_id = ANY (v_ids))),
        (SELECT coalesce(array_agg(x), '{}') FROM rq_stream_state x WHERE x.partition_id = ANY (v_ids));

    INSERT INTO rq_stats_notes (queue_id, partitions)  -- for the statistics (012_stats.sql)
    SELECT p.queue_id, -count(*) FROM rq_partitions p WHERE p.id = ANY (v_ids) GROUP BY p.queue_id;
    INSERT INTO rq_moved AS m (queue_id, name, moved_at)
    SELECT p.queue_id, p.name, clock_timestamp() FROM rq_partitions p WHERE p.id = ANY (v_ids)
    ON CONFLICT (queue_id, name) DO UPDATE SET moved_at = EXCLUDED.moved_at;
    DELETE FROM rq_trace_names n WHERE n.trace_id IN (SELECT t.id FROM rq_traces t WHERE t.partition_id = ANY (v_ids));
    DELETE FROM rq_traces x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_segments x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_dedup x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_dedup_runs x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_consumers x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_dlq x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_deleted x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_stream_state x WHERE x.partition_id = ANY (v_ids);
    DELETE FROM rq_partitions x WHERE x.id = ANY (v_ids);
END;
$$;

-- On the new home: the rows of p_table in p_rows (an array of its row type), each written with
-- its column p_column, a partition's id, renamed from p_old[i] to p_new[i].
CREATE OR REPLACE FUNCTION rq_move_rows(p_table regclass, p_column text, p_rows anyarray, p_old uuid[],
                                        p_new uuid[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO %s SELECT (jsonb_populate_record(x, jsonb_build_object(%L, r.new))).* '
                   'FROM unnest($1) x JOIN unnest($2, $3) AS r(old, new) ON r.old = x.%I',
                   p_table, p_column, p_column)
    USING p_rows, p_old, p_new;
END;
$$;

-- On the new home: writes the rows rq_move_out answered, each partition's under its new id
-- (p_new[i] for p_old[i]). A name that had moved away from here earlier is no longer listed
-- in rq_moved.
CREATE OR REPLACE FUNCTION rq_move_in(p_old uuid[], p_new uuid[], p_partitions rq_partitions[],
                                      p_segments rq_segments[], p_dedup rq_dedup[], p_dedup_runs rq_dedup_runs[],
                                      p_consumers rq_consumers[], p_dead_letters rq_dlq[], p_deleted rq_deleted[],
                                      p_traces rq_traces[], p_trace_names rq_trace_names[],
                                      p_stream_state rq_stream_state[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM rq_move_rows('rq_partitions', 'id', p_partitions, p_old, p_new);
    PERFORM rq_move_rows('rq_segments', 'partition_id', p_segments, p_old, p_new);
    PERFORM rq_move_rows('rq_dedup', 'partition_id', p_dedup, p_old, p_new);
    PERFORM rq_move_rows('rq_dedup_runs', 'partition_id', p_dedup_runs, p_old, p_new);
    PERFORM rq_move_rows('rq_consumers', 'partition_id', p_consumers, p_old, p_new);
    PERFORM rq_move_rows('rq_dlq', 'partition_id', p_dead_letters, p_old, p_new);
    PERFORM rq_move_rows('rq_deleted', 'partition_id', p_deleted, p_old, p_new);
    PERFORM rq_move_rows('rq_traces', 'partition_id', p_traces, p_old, p_new);
    PERFORM rq_move_rows('rq_stream_state', 'partition_id', p_stream_state, p_old, p_new);
    INSERT INTO rq_trace_names SELECT * FROM unnest(p_trace_names) ON CONFLICT DO NOTHING;
    INSERT INTO rq_stats_notes (queue_id, partitions)
    SELECT x.queue_id, count(*) FROM unnest(p_partitions) x GROUP BY x.queue_id;
    DELETE FROM rq_moved m USING unnest(p_partitions) x WHERE m.queue_id = x.queue_id AND m.name = x.name;
END;
$$;

-- On the catalog: lists each moved name under its new id.
CREATE OR REPLACE FUNCTION rq_directory_relist(p_queue text[], p_partition text[], p_id uuid[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO rq_directory AS d (queue, partition, id)
    SELECT * FROM unnest(p_queue, p_partition, p_id)
    ON CONFLICT ON CONSTRAINT rq_directory_pkey DO UPDATE SET id = EXCLUDED.id;
$$;

-- On a member: the names that moved away from here after p_since (NULL: in the last ten
-- minutes), with when each moved. A move's time is read as it lists the name, moments before
-- it commits, so a move that commits after another one listed later may carry the earlier
-- time: the ten seconds before p_since are read again.
CREATE OR REPLACE FUNCTION rq_moved_since(p_since timestamptz)
RETURNS TABLE (queue text, partition text, moved_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT q.name, m.name, m.moved_at
    FROM rq_moved m JOIN rq_queues q ON q.id = m.queue_id
    WHERE m.moved_at > coalesce(p_since - interval '10 seconds', now() - interval '10 minutes')
    ORDER BY m.moved_at
$$;
