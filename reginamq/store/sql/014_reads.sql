-- Reads by offset and partition discovery (Queen 2.x's POST /api/v1/fetch and
-- /api/v1/partitions/changed; engine/reads.py). Neither takes a lease, moves a cursor or writes
-- anything: two readers asking the same question get the same answer.

-- Discovery pages through a queue's partitions in creation order without an index of its own:
-- one on (queue_id, created_at, id) would add to every partition's cost, while discovery is an occasional reader's call. A "since" page starts
-- from the recent-writes index; a page of all partitions sorts the queue's partitions, then
-- looks up the newest segment of the page's rows alone.
-- Each entry's partition bounds (a row with base_offset NULL, first), then the segments that
-- hold its offsets from p_offsets[i] on, in order, while their stored size stays within the
-- entry's budget and what the call has left of p_call_budget (the first segment of an entry
-- always, while the call has any budget: a read must make progress). Offsets below the oldest
-- kept one, or past the end, answer only the bounds; so does a partition or queue that does not
-- exist (found false). One statement, one snapshot: the bounds and the records agree.
CREATE OR REPLACE FUNCTION rq_fetch(p_queues text[], p_partitions text[], p_offsets bigint[],
                                    p_budgets bigint[], p_call_budget bigint)
RETURNS TABLE (entry int, found boolean, high_watermark bigint, log_start bigint, base_offset bigint,
               created_at timestamptz, txids text[], payloads bytea[], deleted bigint[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_left bigint := p_call_budget;
    v_used bigint;
    v_part record;
    v_first bigint;
    v_from bigint;
    v_seg record;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        SELECT p.id, p.log_start, p.last_offset INTO v_part
        FROM rq_queues q JOIN rq_partitions p ON p.queue_id = q.id AND p.name = p_partitions[i]
        WHERE q.name = p_queues[i];
        IF NOT FOUND THEN
            RETURN QUERY SELECT i, false, 0::bigint, 0::bigint, NULL::bigint, NULL::timestamptz, NULL::text[],
                                NULL::bytea[], NULL::bigint[];
            CONTINUE;
        END IF;
        v_first := rq_first_offset(v_part.id, v_part.log_start, v_part.last_offset);
        RETURN QUERY SELECT i, true, v_part.last_offset + 1, v_first, NULL::bigint, NULL::timestamptz,
                            NULL::text[], NULL::bytea[], NULL::bigint[];
        CONTINUE WHEN p_offsets[i] < v_first OR p_offsets[i] > v_part.last_offset OR v_left <= 0;
        v_from := coalesce((SELECT max(s.base_offset) FROM rq_segments s
                            WHERE s.partition_id = v_part.id AND s.base_offset <= p_offsets[i]), v_first);
        v_used := 0;
        FOR v_seg IN
            SELECT s.base_offset, s.end_offset, s.created_at, s.txids, s.payloads,
                   pg_column_size(s.payloads) AS size
            FROM rq_segments s WHERE s.partition_id = v_part.id AND s.base_offset >= v_from
            ORDER BY s.base_offset
        LOOP
            RETURN QUERY SELECT i, true, NULL::bigint, NULL::bigint, v_seg.base_offset, v_seg.created_at,
                                v_seg.txids, v_seg.payloads,
                                ARRAY(SELECT d.message_offset FROM rq_deleted d
                                      WHERE d.partition_id = v_part.id
                                        AND d.message_offset BETWEEN v_seg.base_offset AND v_seg.end_offset);
            v_used := v_used + v_seg.size;
            v_left := v_left - v_seg.size;
            EXIT WHEN v_used >= p_budgets[i] OR v_left <= 0;
        END LOOP;
    END LOOP;
END;
$$;

-- One page of a queue's partitions written at or after p_since (all of them without it), in
-- creation order after the page cursor (p_after_created, p_after_id); p_limit + 1 rows, so the
-- caller knows whether there is a next page. A partition's last_write_at moves at most once a
-- second (rq_push), so it only narrows the candidates (a write at t stamps it no earlier than
-- t - 1 s); the newest segment's created_at, the write's own instant, decides and is answered as
-- lastWriteAt. A partition whose segments retention has all deleted is decided by last_write_at.
-- safe_time: the statement's start, or the start of the oldest transaction still open on the
-- database if earlier (a push in flight stamps its partitions no earlier than that): every write
-- before it is in this answer. found is false for a queue that does not exist (no other rows).
CREATE OR REPLACE FUNCTION rq_partitions_changed(p_queue text, p_since timestamptz, p_after_created timestamptz,
                                                 p_after_id uuid, p_limit int)
RETURNS TABLE (found boolean, safe_time timestamptz, id uuid, name text, last_offset bigint, log_start bigint,
               last_write_at timestamptz, created_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_queue bigint;
    v_safe timestamptz := least(statement_timestamp(), (
        SELECT min(a.xact_start) FROM pg_stat_activity a
        WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid() AND a.state <> 'idle'
          AND a.datname = current_database()));
BEGIN
    SELECT q.id INTO v_queue FROM rq_queues q WHERE q.name = p_queue;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, v_safe, NULL::uuid, NULL::text, NULL::bigint, NULL::bigint, NULL::timestamptz,
                            NULL::timestamptz;
        RETURN;
    END IF;
    IF p_since IS NULL THEN
        -- the page first (the queue's partitions, top-N by creation), the newest segments of
        -- its rows only
        RETURN QUERY
            SELECT true, v_safe, p.id, p.name, p.last_offset, rq_first_offset(p.id, p.log_start, p.last_offset),
                   coalesce(newest.created_at, p.last_write_at), p.created_at
            FROM (SELECT * FROM rq_partitions p0
                  WHERE p0.queue_id = v_queue
                    AND (p_after_created IS NULL OR (p0.created_at, p0.id) > (p_after_created, p_after_id))
                  ORDER BY p0.created_at, p0.id
                  LIMIT p_limit + 1) p
            LEFT JOIN LATERAL (SELECT s.created_at FROM rq_segments s WHERE s.partition_id = p.id
                               ORDER BY s.base_offset DESC LIMIT 1) newest ON true
            ORDER BY p.created_at, p.id;
    ELSE
        RETURN QUERY
            SELECT true, v_safe, p.id, p.name, p.last_offset, rq_first_offset(p.id, p.log_start, p.last_offset),
                   coalesce(newest.created_at, p.last_write_at), p.created_at
            FROM rq_partitions p
            LEFT JOIN LATERAL (SELECT s.created_at FROM rq_segments s WHERE s.partition_id = p.id
                               ORDER BY s.base_offset DESC LIMIT 1) newest ON true
            WHERE p.queue_id = v_queue
              AND (p_after_created IS NULL OR (p.created_at, p.id) > (p_after_created, p_after_id))
              AND p.last_write_at >= p_since - interval '1 second'
              AND coalesce(newest.created_at, p.last_write_at) >= p_since
            ORDER BY p.created_at, p.id
            LIMIT p_limit + 1;
    END IF;
    IF NOT FOUND THEN
        RETURN QUERY SELECT true, v_safe, NULL::uuid, NULL::text, NULL::bigint, NULL::bigint, NULL::timestamptz,
                            NULL::timestamptz;
    END IF;
END;
$$;
