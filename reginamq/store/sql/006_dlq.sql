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
