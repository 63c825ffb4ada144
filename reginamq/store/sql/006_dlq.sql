-- The dead-letter queue of queues that keep one (dlq_enabled): a copy of each message a consumer
-- group gave up on (an ack with status dlq, or a failure once the queue's retry budget is spent,
-- 004_ack.sql), with the error and the retries it had, kept until an operator replays or purges
-- it. A snapshot, so that it outlives the message's segment under retention.
CREATE TABLE IF NOT EXISTS rq_dlq (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id        bigint NOT NULL,
    partition_id    uuid NOT NULL,
    consumer_group  text NOT NULL,
    message_offset  bigint NOT NULL,
    transaction_id  text NOT NULL,
    payload         bytea NOT NULL,
    message_created_at timestamptz NOT NULL,
    error_message   text,
    retry_count     int NOT NULL,
    failed_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS rq_dlq_queue ON rq_dlq (queue_id, failed_at);
-- "Is this message dead for this group?" while browsing, and replay/retry by message.
CREATE INDEX IF NOT EXISTS rq_dlq_message ON rq_dlq (partition_id, message_offset);

-- Browsing the dead-letter queue of one queue, newest failures first, with the total count
-- of the filtered set on every row (a page and its total in one statement).
CREATE OR REPLACE FUNCTION rq_dlq_page(
    p_queue text, p_group text, p_partition text, p_from timestamptz, p_to timestamptz,
    p_limit int, p_offset int
) RETURNS TABLE (id uuid, transaction_id text, partition_id uuid, queue_name text, partition_name text,
                 consumer_group text, error_message text, retry_count int, payload bytea,
                 created_at timestamptz, failed_at timestamptz, total bigint)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.transaction_id, d.partition_id, q.name, p.name, d.consumer_group, d.error_message,
           d.retry_count, d.payload, d.message_created_at, d.failed_at, count(*) OVER ()
    FROM rq_dlq d
    JOIN rq_queues q ON q.id = d.queue_id
    JOIN rq_partitions p ON p.id = d.partition_id
    WHERE q.name = p_queue
      AND (p_group IS NULL OR d.consumer_group = p_group)
      AND (p_partition IS NULL OR p.name = p_partition)
      AND (p_from IS NULL OR d.failed_at >= p_from)
      AND (p_to IS NULL OR d.failed_at <= p_to)
    ORDER BY d.failed_at DESC, d.id
    LIMIT p_limit OFFSET p_offset
$$;

-- Replay one dead letter: its snapshot goes back to the end of its partition as a new message
-- (same transactionId, new id; rq_append_copy, 010_messages.sql) and the entry is removed.
-- Nothing comes back for an unknown id; a row with a NULL offset when the partition no longer
-- exists (the entry is kept).
CREATE OR REPLACE FUNCTION rq_dlq_replay(p_id uuid, p_new_id uuid)
RETURNS TABLE (message_offset bigint, partition_id uuid, transaction_id text, queue_name text,
               partition_name text)
LANGUAGE plpgsql AS $$
DECLARE
    v_entry  record;
    v_off    bigint;
BEGIN
    SELECT d.partition_id INTO v_entry FROM rq_dlq d WHERE d.id = p_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Partition lock first, then the entry: the same order as a retry.
    PERFORM 1 FROM rq_partitions p WHERE p.id = v_entry.partition_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, v_entry.partition_id, NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;
    DELETE FROM rq_dlq d WHERE d.id = p_id
    RETURNING d.partition_id, d.transaction_id, d.payload INTO v_entry;
    IF NOT FOUND THEN
        RETURN;  -- replayed or purged meanwhile
    END IF;
    v_off := rq_append_copy(v_entry.partition_id, v_entry.transaction_id, v_entry.payload, p_new_id);
    RETURN QUERY
    SELECT v_off, p.id, v_entry.transaction_id, q.name, p.name
    FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE p.id = v_entry.partition_id;
END;
$$;

-- Purge a queue's dead letters, optionally only one group's or one partition's.
CREATE OR REPLACE FUNCTION rq_dlq_purge(p_queue text, p_group text, p_partition text) RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM rq_dlq d
        USING rq_queues q
        WHERE q.name = p_queue AND d.queue_id = q.id
          AND (p_group IS NULL OR d.consumer_group = p_group)
          AND (p_partition IS NULL OR d.partition_id IN (SELECT p.id FROM rq_partitions p
                                                         WHERE p.queue_id = q.id AND p.name = p_partition))
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
