-- Operator routes over single messages: browse, detail, delete (a tombstone) and retry (the
-- dead-letter queue's replay and purge are 006_dlq.sql's). Messages live in segment arrays, so
-- nothing here ever changes an offset: a deleted message keeps its slot, its fragment is
-- replaced by a tombstone (the data is gone) and its offset is recorded in rq_deleted, which the
-- pop path consults to skip it.

CREATE TABLE IF NOT EXISTS rq_deleted (
    partition_id    uuid NOT NULL,
    message_offset  bigint NOT NULL,
    transaction_id  text NOT NULL,
    deleted_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, message_offset)
);

-- One page of a queue's messages, newest first, with the status of each message relative to
-- one reader (the queue-mode cursor or a named group) and the total of the filtered set.
-- Only offsets, transactionIds and statuses are computed for the whole set; payloads are
-- sliced once per segment for the page alone.
CREATE OR REPLACE FUNCTION rq_messages_page(
    p_queue text, p_partition text, p_group text, p_status text, p_from timestamptz, p_to timestamptz,
    p_limit int, p_offset int
) RETURNS TABLE (partition_id uuid, partition_name text, message_offset bigint, transaction_id text,
                 created_at timestamptz, status text, payload bytea, total bigint)
LANGUAGE sql STABLE AS $$
    WITH parts AS MATERIALIZED (
        SELECT p.id, p.name, p.log_start, c.span_start, c.span_end, c.lease_expires_at,
               coalesce(c.committed, rq_seed_cursor(p.id, p.log_start, p.last_offset, g.subscription_from)) AS done
        FROM rq_queues q
        JOIN rq_partitions p ON p.queue_id = q.id
        LEFT JOIN rq_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
        LEFT JOIN rq_consumer_groups g ON g.queue_id = q.id AND g.name = p_group
        WHERE q.name = p_queue AND (p_partition IS NULL OR p.name = p_partition)
    ), msgs AS (
        SELECT pt.id AS pid, pt.name AS pname, s.base_offset, s.base_offset + m.pos - 1 AS off, m.txid,
               s.created_at,
               CASE WHEN EXISTS (SELECT 1 FROM rq_dlq d WHERE d.partition_id = pt.id
                                   AND d.message_offset = s.base_offset + m.pos - 1
                                   AND d.consumer_group = p_group) THEN 'dead'
                    WHEN s.base_offset + m.pos - 1 <= pt.done THEN 'completed'
                    WHEN pt.span_end IS NOT NULL AND pt.lease_expires_at > now()
                         AND s.base_offset + m.pos - 1 BETWEEN pt.span_start AND pt.span_end THEN 'leased'
                    ELSE 'pending' END AS status
        FROM parts pt
        JOIN rq_segments s ON s.partition_id = pt.id
        CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS m(txid, pos)
        WHERE (p_from IS NULL OR s.created_at >= p_from)
          AND (p_to IS NULL OR s.created_at <= p_to)
          AND s.base_offset + m.pos - 1 >= pt.log_start
          AND NOT EXISTS (SELECT 1 FROM rq_deleted x WHERE x.partition_id = pt.id
                            AND x.message_offset = s.base_offset + m.pos - 1)
    ), page AS MATERIALIZED (
        SELECT m.*, count(*) OVER () AS total
        FROM msgs m
        WHERE p_status IS NULL OR m.status = p_status
        ORDER BY m.created_at DESC, m.pid, m.off DESC
        LIMIT p_limit OFFSET p_offset
    ), slices AS (
        SELECT g.pid, g.base_offset, g.lo + u.i - 1 AS off, u.payload
        FROM (SELECT pg.pid, pg.base_offset, min(pg.off) AS lo, max(pg.off) AS hi
              FROM page pg GROUP BY pg.pid, pg.base_offset) g
        JOIN rq_segments s ON s.partition_id = g.pid AND s.base_offset = g.base_offset
        CROSS JOIN LATERAL unnest(s.payloads[g.lo - s.base_offset + 1 : g.hi - s.base_offset + 1])
                           WITH ORDINALITY AS u(payload, i)
    )
    SELECT pg.pid, pg.pname, pg.off, pg.txid, pg.created_at, pg.status, sl.payload, pg.total
    FROM page pg
    JOIN slices sl ON sl.pid = pg.pid AND sl.off = pg.off
    ORDER BY pg.created_at DESC, pg.pid, pg.off DESC
$$;

-- One message by its address (the newest one, should a transactionId repeat in a partition),
-- with its status relative to one reader. Deleted messages are not found.
CREATE OR REPLACE FUNCTION rq_message_get(p_partition uuid, p_txid text, p_group text)
RETURNS TABLE (queue_name text, partition_name text, message_offset bigint, created_at timestamptz,
               status text, payload bytea, dead_groups text[])
LANGUAGE sql STABLE AS $$
    WITH hit AS (
        SELECT q.name AS qname, q.id AS qid, p.name AS pname, p.log_start, p.last_offset,
               s.base_offset + m.pos - 1 AS off,
               s.created_at, s.payloads[m.pos] AS payload
        FROM rq_partitions p
        JOIN rq_queues q ON q.id = p.queue_id
        JOIN rq_segments s ON s.partition_id = p.id AND p_txid = ANY (s.txids)
        CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS m(txid, pos)
        WHERE p.id = p_partition AND m.txid = p_txid AND s.base_offset + m.pos - 1 >= p.log_start
          AND NOT EXISTS (SELECT 1 FROM rq_deleted x WHERE x.partition_id = p.id
                            AND x.message_offset = s.base_offset + m.pos - 1)
        ORDER BY s.base_offset + m.pos - 1 DESC
        LIMIT 1
    )
    SELECT h.qname, h.pname, h.off, h.created_at,
           CASE WHEN EXISTS (SELECT 1 FROM rq_dlq d WHERE d.partition_id = p_partition
                               AND d.message_offset = h.off AND d.consumer_group = p_group) THEN 'dead'
                WHEN h.off <= coalesce(c.committed, rq_seed_cursor(p_partition, h.log_start, h.last_offset,
                                                                   g.subscription_from))
                    THEN 'completed'
                WHEN c.span_end IS NOT NULL AND c.lease_expires_at > now()
                     AND h.off BETWEEN c.span_start AND c.span_end THEN 'leased'
                ELSE 'pending' END,
           h.payload,
           ARRAY(SELECT DISTINCT d.consumer_group FROM rq_dlq d
                 WHERE d.partition_id = p_partition AND d.message_offset = h.off ORDER BY 1)
    FROM hit h
    LEFT JOIN rq_consumers c ON c.partition_id = p_partition AND c.consumer_group = p_group
    LEFT JOIN rq_consumer_groups g ON g.queue_id = h.qid AND g.name = p_group
$$;

-- Delete every live message of a partition with this transactionId: the slot stays (offsets
-- never move), the fragment becomes a tombstone (id and transactionId kept, data gone), the
-- offset goes into rq_deleted, and the message's dead letters and deduplication key go too
-- (so the producer may send it again). Returns how many messages were deleted.
CREATE OR REPLACE FUNCTION rq_message_delete(p_partition uuid, p_txid text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_hit  record;
    v_n    int := 0;
BEGIN
    -- The partition's write lock, as pushes and retention take it.
    PERFORM 1 FROM rq_partitions WHERE id = p_partition FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR v_hit IN
        SELECT s.base_offset, m.pos, s.base_offset + m.pos - 1 AS off
        FROM rq_segments s
        JOIN rq_partitions p ON p.id = s.partition_id
        CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS m(txid, pos)
        WHERE s.partition_id = p_partition AND p_txid = ANY (s.txids) AND m.txid = p_txid
          AND s.base_offset + m.pos - 1 >= p.log_start
          AND NOT EXISTS (SELECT 1 FROM rq_deleted x WHERE x.partition_id = p_partition
                            AND x.message_offset = s.base_offset + m.pos - 1)
    LOOP
        INSERT INTO rq_deleted (partition_id, message_offset, transaction_id)
        VALUES (p_partition, v_hit.off, p_txid) ON CONFLICT DO NOTHING;
        UPDATE rq_segments s
        SET payloads[v_hit.pos] = substring(s.payloads[v_hit.pos] FROM 1 FOR 43)
                                  || convert_to(',"transactionId":' || to_json(p_txid)::text
                                                || ',"traceId":null,"data":null,"producerSub":null,"deleted":true',
                                                'UTF8')
        WHERE s.partition_id = p_partition AND s.base_offset = v_hit.base_offset;
        v_n := v_n + 1;
    END LOOP;
    IF v_n > 0 THEN
        DELETE FROM rq_dlq d WHERE d.partition_id = p_partition AND d.transaction_id = p_txid;
        DELETE FROM rq_dedup d WHERE d.partition_id = p_partition AND d.transaction_id = p_txid;
        IF rq_uuid7_bucket(p_txid) IS NOT NULL THEN  -- a key kept in a run: taken out of it
            UPDATE rq_dedup_runs r
            SET keys = r.keys[:k.pos - 1] || r.keys[k.pos + 1:],
                message_ids = r.message_ids[:k.pos - 1] || r.message_ids[k.pos + 1:]
            FROM (SELECT r2.ctid AS at, array_position(r2.keys, p_txid::uuid) AS pos
                  FROM rq_dedup_runs r2
                  WHERE r2.partition_id = p_partition AND r2.bucket = rq_uuid7_bucket(p_txid)
                    AND p_txid::uuid = ANY (r2.keys)) k
            WHERE r.ctid = k.at;
        END IF;
    END IF;
    RETURN v_n;
END;
$$;

-- Append one message (a stored fragment under a new id) at the end of a partition, the way a
-- push does: under the partition's write lock, stamped after it, with a wake-up. The
-- deduplication window is not consulted: an operator asked for this copy.
CREATE OR REPLACE FUNCTION rq_append_copy(p_partition uuid, p_txid text, p_fragment bytea, p_new_id uuid)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz;
    v_off    bigint;
    v_queue  text;
BEGIN
    PERFORM 1 FROM rq_partitions WHERE id = p_partition FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_now := clock_timestamp();
    UPDATE rq_partitions p SET last_offset = p.last_offset + 1, last_write_at = v_now
    WHERE p.id = p_partition RETURNING p.last_offset INTO v_off;
    INSERT INTO rq_segments (partition_id, base_offset, end_offset, created_at, txids, payloads)
    VALUES (p_partition, v_off, v_off, v_now, ARRAY[p_txid],
            ARRAY[convert_to('"id":"' || p_new_id::text || '"', 'UTF8') || substring(p_fragment FROM 44)]);
    SELECT q.name INTO v_queue FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE p.id = p_partition;
    PERFORM pg_notify('rq_push', v_queue || E'\n' || p_partition::text);
    RETURN v_off;
END;
$$;

-- Retry one message: a copy of it (the newest live one with this transactionId, or its dead
-- letter snapshot once retention removed it from the log) is appended to its partition under a
-- new id with the same transactionId, traceId and data; its dead letters are removed.
-- Returns nothing when there is no such message (or its partition is gone).
CREATE OR REPLACE FUNCTION rq_message_retry(p_partition uuid, p_txid text, p_new_id uuid)
RETURNS TABLE (message_offset bigint, queue_name text, partition_name text, removed_dead_letters int)
LANGUAGE plpgsql AS $$
DECLARE
    v_fragment bytea;
    v_off      bigint;
    v_removed  int;
BEGIN
    PERFORM 1 FROM rq_partitions WHERE id = p_partition FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT s.payloads[m.pos] INTO v_fragment
    FROM rq_segments s
    JOIN rq_partitions p ON p.id = s.partition_id
    CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS m(txid, pos)
    WHERE s.partition_id = p_partition AND p_txid = ANY (s.txids) AND m.txid = p_txid
      AND s.base_offset + m.pos - 1 >= p.log_start
      AND NOT EXISTS (SELECT 1 FROM rq_deleted x WHERE x.partition_id = p_partition
                        AND x.message_offset = s.base_offset + m.pos - 1)
    ORDER BY s.base_offset + m.pos - 1 DESC
    LIMIT 1;
    IF v_fragment IS NULL THEN
        SELECT d.payload INTO v_fragment FROM rq_dlq d
        WHERE d.partition_id = p_partition AND d.transaction_id = p_txid
        ORDER BY d.failed_at DESC LIMIT 1;
    END IF;
    IF v_fragment IS NULL THEN
        RETURN;
    END IF;
    v_off := rq_append_copy(p_partition, p_txid, v_fragment, p_new_id);
    DELETE FROM rq_dlq d WHERE d.partition_id = p_partition AND d.transaction_id = p_txid;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN QUERY
    SELECT v_off, q.name, p.name, v_removed
    FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE p.id = p_partition;
END;
$$;

-- Forget tombstones no pop can reach any more (before the first stored message, or of a
-- deleted partition).
CREATE OR REPLACE FUNCTION rq_deleted_purge_step(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_deleted x WHERE ctid IN (
            SELECT x2.ctid FROM rq_deleted x2
            LEFT JOIN rq_partitions p ON p.id = x2.partition_id
            WHERE p.id IS NULL OR x2.message_offset < rq_first_offset(p.id, p.log_start, p.last_offset)
            LIMIT p_limit)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
